// Package poll is the safety net behind the webhooks. A registry's webhook
// can be lost (flotilla restarting, a sender that does not retry, a
// misconfigured hook), and a push whose webhook is lost would never roll
// out. The Poller lists every image application's tags periodically (its
// interval, jittered, backing off while the registry fails), picks with the
// application's version policy the newest version that no rollout was
// started for (rollout.Polled), and journals it as the push a registry
// webhook would have sent (events.TypeImagePushed, marked
// events.SourcePoll): verify, dedupe and plan are the webhook's. It also
// resolves the deployed tag: one pushed again with a new digest (rebuilt,
// its webhook lost) is fed in as that webhook's push would be
// (rollout.PolledMoved). Conditional requests are not made: the
// distribution registry gives no ETag or Last-Modified on its tag list,
// and a moved tag does not change the list. A git
// application's branch head is read as `git ls-remote` does
// (rollout.PolledCommit) and journaled as the git host's push would be. A version a
// webhook brought already changes nothing; the poll's event id is derived
// from the repository, tag and digest, so the journal drops a poll's repeat.
//
// A release set of image members is polled as one, at the set's interval
// (releaseSets[].poll): each member's tags with its own version policy,
// against its entries in the set's deployed version, rollouts in flight
// and latest versions (rollout.MemberState); each member's newest is fed
// in as that member's push, which verify and plan take as the set's.
//
// In scale-out mode each replica polls only the applications whose pushes
// fall in the bus partitions it holds (Options.Owns).
package poll
