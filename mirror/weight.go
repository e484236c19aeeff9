package mirror

// The in-flight bound (Options.InFlightBytes) is charged, for every record
// read and not yet acknowledged, with InFlightWeight: its key, value and
// header bytes plus what holding it costs in memory besides them, measured
// rather than guessed (TestInFlightWeightCoversAnItem for the engine's part,
// eventhubs.TestBatchedEventMemory for the sink's). Before, an event was
// charged its key and value plus 256 bytes, about a third of what a 100 B
// record then cost (estimated from these measurements), so the bound held
// about three times the memory it was sized for wherever it stayed full (at
// the namespace's quota).
//
// The copy of a value inside a batch is not charged: a sender fills one
// batch at a time, so those copies are bounded by the number of hub
// partitions times the maximum batch size.
const (
	// itemMemory is the engine's share: the record in its fetch's slice
	// (112 B, 122 B measured), with a margin. Its item (24 B) waits by
	// value in its reader's run, a sender's queue and the run its sender
	// took (queue.go), whose slots are their fixed memory (a queue's ring
	// grows to its capacity while items wait in it, and stays), and then
	// becomes an entry in its sender's list of batched events (40 B, the
	// list reused from batch to batch): like the batch's copies below,
	// these are bounded by the number of partitions times the runs', the
	// queue's and the batch's sizes.
	itemMemory = 144
	// BatchedEventMemory is what a [Batch] keeps of one event besides its
	// value and key bytes, until it is sent: for the Event Hubs sink, the
	// AMQP encoding of the event's properties, message id and framing
	// (≈ 170 B), the spare capacity of the buffer it was encoded into (the
	// SDK keeps it: 512 B for the 283 B of a 100 B keyed record) and its
	// slot in the batch's list.
	BatchedEventMemory = 448
	// headerMemory is charged per header besides twice its name and value
	// (the fetched copy and the batch's encoding): its Header struct and
	// the property name's prefix.
	headerMemory = 64
)

// InFlightWeight is what r is charged against the in-flight bound
// (Options.InFlightBytes) from its reading until Event Hubs acknowledged it.
func InFlightWeight(r *Record) int64 {
	w := int64(len(r.Value)+len(r.Key)) + itemMemory + BatchedEventMemory
	for _, h := range r.Headers {
		w += int64(2*(len(h.Key)+len(h.Value))) + headerMemory
	}
	return w
}
