package mirror

import (
	"context"
	"errors"
	"fmt"
)

// fitsHub reports whether r's event fits an empty batch of its hub partition,
// checked before the record is handed to a sender, so that under the fail
// policy no record past an oversized one is sent (it would be sent again by
// every drain). A record is tried on an empty batch unless its estimated
// size is at most that of a record already known to fit the hub, so records
// of a steady size are checked once per drain and hub. It answers true when
// the check cannot be made (the sender then finds out).
func (d *drain) fitsHub(ctx context.Context, s *sender, r *Record) bool {
	est := int64(len(r.Key) + len(r.Value) + eventOverhead)
	for _, h := range r.Headers {
		est += int64(len(h.Key) + len(h.Value))
	}
	known := d.fits[s.hub]
	if est <= known.Load() {
		return true
	}
	b, err := d.m.sink.NewBatch(ctx, s.hub, s.partitionID)
	if err != nil {
		return true
	}
	ev := EventFor(r)
	if errors.Is(b.Add(&ev), ErrEventTooLarge) {
		return false
	}
	for k := known.Load(); est > k && !known.CompareAndSwap(k, est); k = known.Load() {
	}
	return true
}

// oversized applies the oversize policy to the record at offset, whose event
// is larger than event hub hub accepts: under skip it is marked done and
// logged and nil is returned; under fail the error that stops the partition
// before it is returned.
func (d *drain) oversized(ps *partitionState, offset int64, size int, hub string, err error) error {
	tp := ps.tp
	if d.m.opts.OversizePolicy == OversizeSkip {
		ps.skip(offset)
		d.logger.WarnContext(context.Background(), "oversized record skipped (MIRROR_OVERSIZE_POLICY=skip)",
			"topic", tp.Topic, "partition", tp.Partition, "offset", offset, "value_bytes", size, "hub", hub)
		return nil
	}
	return fmt.Errorf("record at offset %d (%d value bytes) is larger than event hub %q accepts; partition stopped before it (MIRROR_OVERSIZE_POLICY=skip leaves such records out): %w",
		offset, size, hub, err)
}
