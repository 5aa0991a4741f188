package mongotest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopatterns/mongopatterns/patterns"
)

// RunPlans runs test once for each server path ("plan") of a repository
// that the server in use can take, as a subtest named after the plan:
//
//   - "native": planFor of [Native], the path a MongoDB 8 replica set
//     takes, where every optional feature is present;
//   - "portable": planFor of [Portable], the path of a server with no
//     optional feature, which needs none and so runs everywhere;
//   - "server": planFor of [Server], when the server in use takes a path
//     that is neither (FerretDB 2.x has some features and not others);
//   - then the plan of each of [KnownServers] that takes another path,
//     named after that server (a mongos 7.1+ at an FCV of 7.1+ has the
//     writes without the shard key, which no replica set has).
//
// Plans that are equal run once, under the first name. A plan other than
// the portable one runs only where it is the server's own plan, and is
// skipped elsewhere with the message of [Require]: the server and the
// features that the plan needs and the server lacks (each feature of
// the other plan whose removal changes that plan), so that a reader sees
// what did not run and why. A repository's test hook (ForcePlan in its export_test.go) makes
// the repository take the plan it is given; planFor is the repository's
// pure plan function.
func RunPlans[P comparable](t *testing.T, planFor func(*patterns.Server) P, test func(t *testing.T, p P)) {
	t.Helper()
	own := planFor(Server())
	portable := planFor(Portable())
	plans := []struct {
		name string
		plan P
	}{{"native", planFor(Native())}, {"portable", portable}, {"server", own}}
	known := KnownServers()
	for _, name := range slices.Sorted(maps.Keys(known)) {
		plans = append(plans, struct {
			name string
			plan P
		}{name, planFor(known[name])})
	}
	for i, p := range plans {
		seen := false
		for _, q := range plans[:i] {
			seen = seen || q.plan == p.plan
		}
		if seen {
			continue
		}
		t.Run(p.name, func(t *testing.T) {
			if p.plan != own && p.plan != portable {
				t.Skipf("skipped: %s lacks %s", Server(), needs(planFor, p.plan, Server()))
			}
			test(t, p.plan)
		})
	}
}

// needs names the features that the plans of the known servers need to
// take plan, and srv lacks: each feature f of a known server whose plan
// is plan, such that the same server without f takes another path.
func needs[P comparable](planFor func(*patterns.Server) P, plan P, srv *patterns.Server) string {
	var out []string
	seen := map[patterns.Feature]bool{}
	for _, known := range append([]*patterns.Server{Native()}, sortedKnown()...) {
		if planFor(known) != plan {
			continue
		}
		for _, f := range patterns.AllFeatures() {
			if known.Has(f) && !srv.Has(f) && !seen[f] && planFor(known.Without(f)) != plan {
				seen[f] = true
				out = append(out, string(f))
			}
		}
	}
	if len(out) == 0 {
		// No single feature makes the difference: name them all.
		for _, f := range patterns.AllFeatures() {
			if !srv.Has(f) {
				out = append(out, string(f))
			}
		}
	}
	return strings.Join(out, ", ")
}

// sortedKnown returns the known servers in the order of their names.
func sortedKnown() []*patterns.Server {
	known := KnownServers()
	names := slices.Sorted(maps.Keys(known))
	out := make([]*patterns.Server, len(names))
	for i, n := range names {
		out[i] = known[n]
	}
	return out
}

// Native returns a MongoDB 8 replica set as [patterns.NewServer] sees it:
// a server with every optional feature.
func Native() *patterns.Server { return KnownServers()["MongoDB 8 replica set"] }

// Portable returns a server with no optional feature.
func Portable() *patterns.Server { return &patterns.Server{} }

// KnownServers returns the servers the library knows, built by
// [patterns.NewServer] from the replies of hello and buildInfo each gave,
// by name: for the table tests of the repositories' plan functions. The
// mongos of MongoDB 6.0, 7.0, 7.1 and 8.0 are among them, those from 7.1
// at each featureCompatibilityVersion they run at ([patterns.Server.WithFCV]
// from getParameter's reply, as [patterns.Capabilities] reads it): the FCV
// decides what a 7.1+ cluster accepts, and a cluster runs at the older FCV
// until its upgrade completes.
func KnownServers() map[string]*patterns.Server {
	sessions := bson.E{Key: "logicalSessionTimeoutMinutes", Value: int32(30)}
	mongos := bson.D{{Key: "msg", Value: "isdbgrid"}, sessions}
	mongo := func(version string) bson.D {
		return bson.D{{Key: "version", Value: version}, {Key: "gitVersion", Value: "0123456789abcdef0123456789abcdef01234567"}, {Key: "storageEngines", Value: bson.A{"wiredTiger"}}}
	}
	type replies struct {
		hello, buildInfo bson.D
		fcv              string // getParameter's featureCompatibilityVersion.version; "" when not read
	}
	known := map[string]replies{
		"MongoDB 8 replica set":         {bson.D{{Key: "setName", Value: "rs0"}, sessions}, mongo("8.0.4"), ""},
		"MongoDB 6 standalone":          {bson.D{sessions}, mongo("6.0.19"), ""},
		"MongoDB 6.0 mongos":            {mongos, mongo("6.0.19"), ""},
		"MongoDB 7.0 mongos":            {mongos, mongo("7.0.16"), ""},
		"MongoDB 7.1 mongos at FCV 7.0": {mongos, mongo("7.1.1"), "7.0"},
		"MongoDB 7.1 mongos at FCV 7.1": {mongos, mongo("7.1.1"), "7.1"},
		"MongoDB 8.0 mongos at FCV 7.0": {mongos, mongo("8.0.4"), "7.0"},
		"MongoDB 8.0 mongos at FCV 8.0": {mongos, mongo("8.0.4"), "8.0"},
		"FerretDB 1.24":                 {bson.D{sessions}, bson.D{{Key: "version", Value: "7.0.42"}, {Key: "ferretdbVersion", Value: "unknown"}}, ""},
		"FerretDB 2.7":                  {bson.D{sessions}, bson.D{{Key: "version", Value: "7.0.77"}, {Key: "gitVersion", Value: "unknown"}, {Key: "ferretdb", Value: bson.D{{Key: "version", Value: "v2.7.0"}}}}, ""},
		"other":                         {bson.D{{Key: "setName", Value: "globaldb"}, sessions}, bson.D{{Key: "version", Value: "4.2.0"}}, ""},
	}
	out := make(map[string]*patterns.Server, len(known))
	for name, r := range known {
		srv, err := knownServer(r.hello, r.buildInfo, r.fcv)
		if err != nil {
			panic(fmt.Sprintf("mongotest: server %s: %v", name, err))
		}
		out[name] = srv
	}
	return out
}

// Mongos returns the names of the mongos among [KnownServers], oldest
// first: for the rows of plan tables where every mongos takes one path.
func Mongos() []string {
	return []string{"MongoDB 6.0 mongos", "MongoDB 7.0 mongos", "MongoDB 7.1 mongos at FCV 7.0", "MongoDB 7.1 mongos at FCV 7.1", "MongoDB 8.0 mongos at FCV 7.0", "MongoDB 8.0 mongos at FCV 8.0"}
}

// knownServer builds a server from the replies of hello and buildInfo,
// and of getParameter {featureCompatibilityVersion: 1} when fcv is set.
func knownServer(hello, buildInfo bson.D, fcv string) (*patterns.Server, error) {
	h, err := bson.Marshal(hello)
	if err != nil {
		return nil, err
	}
	bi, err := bson.Marshal(buildInfo)
	if err != nil {
		return nil, err
	}
	srv, err := patterns.NewServer(h, bi)
	if err != nil || fcv == "" {
		return srv, err
	}
	gp, err := bson.Marshal(bson.D{{Key: "featureCompatibilityVersion", Value: bson.D{{Key: "version", Value: fcv}}}})
	if err != nil {
		return nil, err
	}
	return srv.WithFCV(gp)
}
