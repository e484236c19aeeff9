// Package bench measures the mirror's throughput beside the two limits the
// same machine can measure in the same run (issue 7): how fast the Kafka
// adapter reads the records (the read limit) and how fast the Event Hubs
// sink sends the same events (the send limit).
//
// One run starts, per case (record size × keyless/keyed), a fresh in-process
// Kafka (kfake, 5 topics × 4 partitions) and a fresh Event Hubs emulator (5
// hubs × 4 partitions) in the calling process, loads the records with
// franz-go's kgo, and measures each phase (read, send, mirror) in a child
// process that re-executes the current binary. The child holds only the
// client side (kafka-go, the engine, the azeventhubs SDK), so its peak RSS is
// the mirror's memory and not the backlog's, and its CPU time is the
// client's; the parent's CPU time over the same interval is reported as the
// infrastructure's (kfake and the emulator).
//
// A binary that embeds the benchmark calls [ChildSpecFromEnv] first and,
// when it returns a spec, [RunChild] instead of its normal work.
package bench
