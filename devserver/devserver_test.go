package devserver_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopatterns/mongopatterns/devserver"
)

// roundTrip writes a document through uri and reads it back.
func roundTrip(t *testing.T, uri string, write bool) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Disconnect(ctx)) }()
	coll := c.Database("devserver_test").Collection("c")
	if write {
		_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: 42}})
		require.NoError(t, err)
	}
	var doc struct{ V int }
	require.NoError(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: 1}}).Decode(&doc))
	return doc.V
}

func TestStartServesAndStopRemovesTheTempDir(t *testing.T) {
	srv, err := devserver.Start(context.Background(), devserver.Options{})
	require.NoError(t, err)
	require.Regexp(t, `^mongodb://127\.0\.0\.1:\d+/$`, srv.URI())
	require.Equal(t, 42, roundTrip(t, srv.URI(), true))
	require.DirExists(t, srv.Dir())

	require.NoError(t, srv.Stop())
	require.NoDirExists(t, srv.Dir(), "a temporary data directory is removed")
	require.NoError(t, srv.Stop(), "Stop is idempotent")
}

func TestDataDirIsKeptAndReused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	srv, err := devserver.Start(context.Background(), devserver.Options{Dir: dir})
	require.NoError(t, err)
	roundTrip(t, srv.URI(), true)
	require.NoError(t, srv.Stop())
	require.DirExists(t, dir, "a given data directory is kept")

	srv, err = devserver.Start(context.Background(), devserver.Options{Dir: dir})
	require.NoError(t, err)
	defer srv.Stop()
	require.Equal(t, 42, roundTrip(t, srv.URI(), false), "data survives a restart")
}

func TestStartFailsOnABusyAddressAndCleansUp(t *testing.T) {
	srv, err := devserver.Start(context.Background(), devserver.Options{})
	require.NoError(t, err)
	defer srv.Stop()
	addr := strings.TrimSuffix(strings.TrimPrefix(srv.URI(), "mongodb://"), "/")

	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	_, err = devserver.Start(context.Background(), devserver.Options{Addr: addr})
	require.ErrorContains(t, err, addr, "the error names the address")
	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, entries, "a failed start removes its temporary directory")
}
