// Package kafka adapts github.com/segmentio/kafka-go to [mirror.Source] and
// [mirror.Claim]: the Kafka side of the Kafka → Event Hubs mirror.
//
// It lists topics, joins the mirror's consumer group, fetches records under
// read_committed isolation, reads watermarks and committed offsets, and
// commits with generation fencing. Selecting topics and routing them to
// event hubs is the engine's job, not this package's.
//
// # Connections
//
// A [Source] owns one kafka-go Transport (a pool of connections per broker:
// one for each request in flight, kept for reuse while idle) used by Fetch,
// Watermarks, Committed, Commit, LeaveGroup and Topics; and, per group
// membership, the coordinator connections of a kafka-go ConsumerGroup.
// Watermarks and OffsetsForTime send one ListOffsets per partition leader
// and timestamp (listoffsets.go), not kafka-go's one per partition and
// offset; Committed and Commit go straight to the group's coordinator, found
// once (coordinator.go), not after a FindCoordinator each. All of them use
// the same TLS config and SASL mechanism (PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512). The password is never logged nor put
// in an error, and [SASL] and [Options] print it redacted.
//
// Dial errors surface at once (connection refused) or after DialTimeout;
// every request is bounded by the caller's ctx and by RequestTimeout, so no
// call hangs on a broker that stopped answering.
//
// # Freshness
//
// kafka-go's Transport answers Metadata from a cache and routes requests with
// it. Topics therefore sends its own Metadata request (v12, with topic ids,
// see topicMetadataRequest: kafka-go stops at v8 and has no topic id), so
// topics created or deleted moments ago are reflected, and
// when the answer differs from the Transport's cache (new topic, partition
// count, leader) it drops the Transport's pools, which makes the next request
// start from fresh metadata. Fetch, Watermarks, Committed and Commit do the
// same once, and retry once, when a request fails with an unknown topic or
// partition, a moved leader or a moved coordinator.
//
// # Consumer group
//
// Claim uses kafka-go's ConsumerGroup (round-robin, else range assignment).
// A Source has one group member at a time, shared by every claim (see
// [Source.Claim] and membership.go): a Claim made while another is held
// takes the same generation, without a join; the member stays
// Options.IdleGrace after the last Release (leaving at once when its
// generation ends while unused), and leaves without grace after a commit
// with an unknown outcome. A Claim waits for a generation at most
// Options.JoinTimeout and a third of its context's remaining time. Commits
// carry the claim's generation and member ID, and the coordinator rejects
// them once the generation is over (kfake does too: ILLEGAL_GENERATION or
// UNKNOWN_MEMBER_ID), which is what keeps offsets from regressing across
// processes. Commit also refuses partitions the claim does not own.
//
// A claim's commits are kept in order: one OffsetCommit at a time, and none
// sent before the previous request is over. A caller that stops waiting
// leaves its request running in the background (up to a minute, or until
// Release or Close); the next commit waits for it, so an older commit never
// lands after a newer one. When a request's outcome stays unknown (its
// connection broke), the next successful commit reads the offsets back
// (OffsetFetch) and commits again if they went backwards.
//
// Measured with the defaults against kfake (1 broker, in process, 2 vCPUs):
//
//   - Claim on a new or empty group: 2–5 ms.
//   - A second member joins: the first claim's Lost fires at the first
//     member's next heartbeat, ≤ HeartbeatInterval (≈500 ms), and the second
//     member's Claim returns right after (≈0.5 s). Re-Claim by the first
//     process takes its already-joined generation in microseconds.
//   - A second Claim in the same process while one is held: ≈10 ms, same
//     generation, no rebalance.
//   - Release of the last claim: LeaveGroup after IdleGrace (5 s), then
//     0.2–2 ms; the remaining member's Lost fires at its next heartbeat
//     (≈0.3–0.5 s).
//   - Broker down: Lost fires at the next heartbeat; every call fails within
//     about a millisecond (connection refused). Broker back on the same port
//     with its data: every call works again within a few ms, including
//     Claim, because LeaveGroups that failed during the outage are resent
//     before the next join (otherwise the restored member would hold the join
//     for SessionTimeout).
//   - Fetch: ≈420k records/s (≈430 MB/s) for 1 KiB records over 3
//     partitions in parallel, ≈2.2 µs CPU per record for client and broker
//     together, keys and values copied.
//
// # Fetch
//
// Fetch sends kafka-go's fetch request through the Transport rather than
// Client.Fetch, because Client.Fetch drops the list of aborted transactions
// and would let records of aborted transactions through. Aborted batches and
// control batches are filtered as the Java consumer does, and Next moves past
// them, so a tail of markers never makes the caller fetch forever.
//
// What kafka-go lets us preserve: nil versus empty key, nil (tombstone) versus
// empty value, and nil versus empty header value are all kept; header order
// and repeated keys are kept. Limitations of kafka-go's decoder: a record's
// time is always its create time (firstTimestamp + delta): for topics with
// message.timestamp.type=LogAppendTime, kafka-go discards the broker's
// append time; and an empty batch (all its records compacted away) is
// invisible, so Next cannot move past it if it is the only thing left before
// End.
package kafka
