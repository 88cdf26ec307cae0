// Package natstest runs a real NATS JetStream cluster for tests: the
// nats-server binary deploy/tools/local/build.sh builds from the Go module
// proxy, as n nodes on free loopback ports (client, route and monitoring
// ports), each with its file store under the test's directory. Tests kill
// a node (SIGKILL) and start it again on its store, to check what a
// scale-out flotilla keeps when a NATS node is lost.
//
// Start and Main run plain nodes: no TLS, no authentication. StartSecured
// runs nodes whose client ports are secured as a production cluster's:
//
//   - TLS with client certificates (verify: true), the servers' and the
//     client's certificates (localhost and 127.0.0.1) signed by a test CA
//     made with crypto/x509;
//   - decentralized JWT authentication (operator mode), with the nkeys and
//     jwt/v2 libraries nsc uses: an operator, its system account, and an
//     account with JetStream (64 MB in memory, 1 GB on disk), both
//     preloaded (resolver: MEMORY, resolver_preload), and a user of that
//     account whose credentials file is written as nsc writes it.
//
// Cluster.Auth gives the client's files (CAFile, CertFile and KeyFile,
// CredsFile) and some the servers refuse (UnknownCredsFile, a user of an
// account they do not know; OtherCAFile, a CA that does not sign them),
// and Cluster.URL tls:// URLs. Routes between secured nodes stay plain.
package natstest
