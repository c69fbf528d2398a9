// Package campaign is the fault campaign: TestCampaign starts real
// processes — an etcd, eight `target serve` (each gossiping its health and
// reached through a faultnet proxy on 127.0.0.1: the namespace paths in
// etcd are the proxies' addresses), a controller, and two mappings over
// NBD: the owner, a foreground read-write `map` of a 4+2 volume that a
// verifying workload writes and reads through three connections (half of
// its operations on 32 hot blocks, so that reads overlap writes of the
// same block; it records every acknowledged write and flush), and the
// reader, a read-only `map` of a second 4+2 volume filled once at the
// start, whose every successful read must return that content.
//
// Round seed S injects one fault while both run, the kind faults[S mod
// len(faults)] (consecutive seeds go through every kind), from: kill -9 or
// SIGSTOP/SIGCONT of a target, etcd (SIGSTOP also for 12 s, past the
// owner's lease TTL), the controller, the owner or the reader; a target
// restart; a target killed until the controller marks its namespace out
// and rebuilds its shards; and network faults between the clients and one
// or two targets — partition, stall, delay, connection resets. The proxy
// is the target's only address, so a network fault cuts the controller's
// moves from that target as well as the mappings. Two kinds cut one client
// only: the owner maps with --host-traddr 127.0.0.2 and the controller
// runs with --host-traddr 127.0.0.3 (all of 127/8 is local on Linux), and
// the proxies partition connections from that source alone
// (faultnet.Proxy.PartitionFrom): the owner loses one or two targets past
// its IO's wait (it writes around them while the controller, which still
// reaches them and hears them gossip, sees them healthy), or the
// controller loses one or two targets while a third is killed until out
// (its own moves of the read-only volume cannot reach the cut-off targets,
// which it still judges alive and may pick as destinations; the owner
// writes on). The totals count the connections these partitions cut.
//
// Compound rounds (-campaign.compound, CAMPAIGN_COMPOUND=1, `make campaign
// COMPOUND=1`) overlap two or three faults instead, started 0 to 2 s
// apart: half of them one of compoundPairs (an owner killed while a lost
// target's shards rebuild, etcd stopped past the lease TTL during a move,
// the reader stopped while its shards move, the reader stopped while
// `admin drain` moves a target's shards away (a kind only this pair uses:
// compoundOnly, so single-fault seeds keep their kinds; the checks put the
// drained namespace back in service), a partition during a rebuild, the
// owner killed while cut off from targets, ...), the others drawn by
// weight (fault.weight: more for the kinds that touch the write log,
// moves and leases), a third kind in one round of three; all from the
// round's seed, so the replay command reproduces the schedule.
//
// Every read and write of the mappings during the round — the workload's,
// the reader's, and the reads of the fresh mappings the checks use — is
// recorded in the round's history: invoke and return time, block, and the
// version written or read (a block's content begins with its block number
// and version, so a read maps to the one write that wrote it; any other
// content is "bad" and no write's). After the round each block's history
// is checked as a register for linearizability with porcupine
// (github.com/anishathalye/porcupine, partitioned by block): a write that
// failed or never returned may have landed at any time from its invoke
// until the owner that took it exits before the verifying reads
// (history.failedWritesEnd), or never; a read that failed is left out,
// and each block starts from the value the previous round's checks read
// (unknown after a write that failed before it, or a loss). A history that is not
// linearizable fails the round, and the failing blocks' history is saved
// with porcupine's visualisation as history-seed-S.html next to
// processes.log (set CAMPAIGN_DIR to keep them). A check that runs out of
// its budget (CAMPAIGN_CHECK_TIMEOUT, 2m) fails the round too, and saves
// the history as history-seed-S.json.gz, which TestCheckSavedHistory checks
// offline (CAMPAIGN_HISTORY=FILE) with a longer budget. TestHistoryCatchesStaleRead
// shows the check works: a mutant nvstripe (build tag mutant_stale_read)
// answers one read with the block's previous content, and the check must
// catch it.
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
// maps reference; no task is left running (a move the controller starts
// meanwhile, such as the rebuild of a restarted target that gossip judges
// down until its next push-pull, may end within two minutes).
//
// Each round prints its seed and the command that replays it (`make
// campaign SEED=S ROUNDS=1 COMPOUND=0|1`, or CAMPAIGN_SEED / CAMPAIGN_ROUNDS
// / CAMPAIGN_COMPOUND): the same fault schedule, on a fresh cluster (the
// workload's timing is not replayed). `make test` runs three rounds from a
// fixed seed (the owner's and the controller's partitions and a target
// killed) and then one compound round (-campaign.compound-rounds, default
// 1: a partition during a rebuild); `make campaign` fifty from the clock.
// Before a release, run 200 compound rounds: `make campaign COMPOUND=1
// ROUNDS=200 CAMPAIGN_DIR=DIR` (DIR an existing folder that keeps the logs
// and any failing history; 2 to 3 hours on 2 cores); the totals give the
// rounds, each combination of faults, the operations checked, the
// checker's time and the rounds not linearizable.
//
// A failed round does not end the campaign: the cluster recovers
// (cluster.recoverAfter) and the next round runs; a cluster that does not
// recover ends it. The totals (rounds, faults by kind and by combination,
// writes and bytes checked, operations checked for linearizability and
// the checker's time, wall time, every failed seed with its replay
// command) end the log as a table and as one JSON line
// ("campaign-json:"), and the test fails if a round did.
package campaign
