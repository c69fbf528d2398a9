// Package campaign is the fault campaign: TestCampaign starts real
// processes — an etcd, eight `target serve` (each gossiping its health and
// reached through a faultnet proxy on 127.0.0.1: the namespace paths in
// etcd are the proxies' addresses), a controller, and two mappings over
// NBD: the owner, a foreground read-write `map` of a 4+2 volume that a
// verifying workload writes (recording every acknowledged write and
// flush), and the reader, a read-only `map` of a second 4+2 volume filled
// once at the start, whose every successful read must return that
// content.
//
// Round seed S injects one fault while both run, the kind faults[S mod
// len(faults)] (consecutive seeds go through every kind), from: kill -9 or
// SIGSTOP/SIGCONT of a target, etcd (SIGSTOP also for 12 s, past the
// owner's lease TTL), the controller, the owner or the reader; a target
// restart; a target killed until the controller marks its namespace out
// and rebuilds its shards; and network faults between the clients and one
// or two targets — partition, stall, delay, connection resets. The proxy
// is the target's only address, so a network fault cuts the controller's
// moves from that target as well as the mappings.
//
// Then it heals everything, unmaps the reader (see -campaign.reader-attached),
// waits for the controller to report both volumes healthy with no task
// running and nothing blocked, puts namespaces marked out back in service,
// and checks: a scrub (admin.Scrub, what `admin scrub --wait` runs) of
// each volume finds no bad block; every acknowledged block of the written
// volume reads back through a fresh read-only mapping (its last
// acknowledged version, or a later write that failed and may have landed);
// all of the read-only volume reads back through a fresh mapping; the
// slots the allocation bitmaps mark used are exactly those the segment
// maps reference; no task is left running.
//
// Each round prints its seed and the command that replays it (`make
// campaign SEED=S ROUNDS=1`, or CAMPAIGN_SEED / CAMPAIGN_ROUNDS): the same
// fault schedule, on a fresh cluster. `make test` runs three rounds from a
// fixed seed; `make campaign` fifty from the clock. The totals (rounds,
// faults by kind, writes and bytes checked, wall time) end the log as a
// table and as one JSON line ("campaign-json:").
package campaign
