// Command fuzzlive proves, against a live `flotilla serve`, that no
// authenticated webhook can take flotilla down (`make fuzz-live`).
//
// It builds flotilla, starts `flotilla serve` as a child process on a free
// loopback port with a fresh data dir and a generated config that has one
// receiver of every sender type (intake.SenderTypes), each authenticated:
// random secrets in files, and for gar an OIDC key of its own, published as
// oidc.jwksFile. For -duration, -workers workers post random deliveries to
// every receiver, each signed as its sender signs: header tokens (verbatim,
// Bearer, Basic), path tokens (/hooks/<name>/<token>), HMAC signatures in
// each sender's header and format, GAR's bearer token signed with the
// minted key for the configured audience, issuer and service account, and
// CloudEvents on /events in binary, structured and batch mode. Bodies are
// mostly the fixtures of events/intake/testdata/<sender>/ mutated with structure:
// decoded, random values (leaves and containers, inside GAR's base64 data
// too) replaced by hostile ones (times outside years 0001-9999 once in UTC,
// unix milliseconds where seconds go, 2^53+1, huge and negative numbers,
// 100 KB strings, unicode, nulls, wrong types, deep nesting), then signed
// anew; sometimes headers, query and method too; the rest are byte-level
// mutations and random bytes. Each worker has its own math/rand seeded
// -seed + worker number; the seed is printed.
//
// Meanwhile it watches the process and GET /healthz every second. When
// flotilla dies, it is restarted on the same data dir (a restart that fails
// means flotilla is down for good, as the report says), else a new one on a
// new data dir is started, and the fuzz goes on: every crash is counted and
// reported with flotilla's last words. At the end it checks that flotilla
// is up and healthy, that no sender panicked, and that the engine still
// works and has got past everything the fuzz journaled: it pushes an image
// of application sentinel-1 to its own in-process registry, posts that
// push to /events, waits until the rollout plan makes of it is in the API,
// then until no event is in flight (flotilla_dispatch_events_in_flight 0).
// The dispatcher reads the journal in order, so once it has handled the
// push it has read every earlier event, and once nothing is in flight it
// has handled them all. Then it kills flotilla with SIGKILL, restarts it on
// the same data dir and port, and does the same with sentinel-2.
//
// A run fails (exit status 1) when flotilla died, a request got no answer
// or a 5xx other than the intake's documented 503s, "journaling events
// failed; retry later" and "too many request bodies being read" (a 500
// from a sender that panicked is a failure), such a 503 comes again when
// the request is re-posted to the idle flotilla (refused for good, not
// busy), /healthz answered other than 200, or an end check failed: the
// restart, or the engine not done with a sentinel within -check-timeout.
// A request slower than 5s is logged, not failed.
//
// Every request that failed or took over 5s, and on a crash the last 256
// requests flotilla accepted and those in flight (what killed it may have
// been answered 202), is logged without its credentials to failures.jsonl
// in the run's directory. -replay posts them one at a time, signed anew, to
// a fresh flotilla, fails on any 5xx, runs the end checks, and bisects to
// the request to blame (-crash N: only the suspects of crash N).
//
// The fleet is one cluster whose kubeconfig points at a loopback port
// nothing listens on: flotilla serve needs a fleet, and every request to it
// fails at once with "connection refused". That is the least fragile
// setup: the start-up prune logs the failure and serve starts at once (no
// one-minute prune timeout to wait for), resync reads only the clusters of
// in-flight rollouts, no fuzzed delivery can start a rollout (the only
// tracked images are the sentinels', in the fuzzer's own registry), and
// a sentinel rollout's launch fails fast: the dispatcher gives up on it
// after its retries, about 3s, which is most of each sentinel check's time.
//
//	go run ./deploy/tools/fuzzlive -duration 60s            # make fuzz-live
//	go run ./deploy/tools/fuzzlive -seed 42 -duration 10s   # the same workers' requests again
//	go run ./deploy/tools/fuzzlive -replay /tmp/flotilla-fuzzlive-123/failures.jsonl
package main
