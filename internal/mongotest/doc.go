// Package mongotest is the integration-test harness of mongopatterns: it
// finds or starts one real server per test binary, gives every test a fresh
// database on a shared client, skips tests whose feature the server lacks,
// and counts the commands a piece of code sends.
//
// A package opts in with a TestMain:
//
//	func TestMain(m *testing.M) { mongotest.Main(m) }
//
// and a test asks for a database:
//
//	db := mongotest.DB(t)
//	mongotest.Require(t, patterns.FeatureTransactions)
//
// # Server choice
//
// In this order, logged once per test binary with the server's version:
//
//  1. MONGODB_URI, if set.
//  2. MongoDB 8 as a single-node replica set in a container, through
//     testcontainers, when a Docker provider answers.
//  3. The embedded dev server (FerretDB v1.24.2 on SQLite, module
//     devserver/), built with the go command (the build cache makes later
//     builds take seconds) and run on a free port with a temporary data
//     directory, stopped when the tests end. MONGOTEST_DEVSERVER names an
//     executable built already (scripts/test builds it once for every
//     test binary of the run).
//
// MONGOTEST_SERVER=container or MONGOTEST_SERVER=embedded forces step 2 or 3.
// If no server can be started, Main fails with the reasons: tests never
// skip for want of a server.
package mongotest
