package mirror

import (
	"context"
	"errors"
	"fmt"
)

// probeSize is the estimated event size from which a record is checked
// against its hub's maximum before it is handed to a sender. Smaller events
// fit every Event Hubs tier (the smallest maximum is 256 KB); larger ones are
// tried on an empty batch first, so that under the fail policy no record
// past an oversized one is sent (it would be sent again by every drain).
const probeSize = 16 << 10

// fitsHub reports whether ev fits an empty batch of its hub partition. It
// answers true when the check cannot be made (the sender then finds out).
func (d *drain) fitsHub(ctx context.Context, ps *partitionState, s *sender, r *Record, ev *Event) bool {
	est := len(r.Key) + len(r.Value) + eventOverhead
	for _, h := range r.Headers {
		est += len(h.Key) + len(h.Value)
	}
	if est < probeSize {
		return true
	}
	b, err := d.m.sink.NewBatch(ctx, s.hub, s.partitionID)
	if err != nil {
		return true
	}
	return !errors.Is(b.Add(ev), ErrEventTooLarge)
}

// oversized applies the oversize policy to the record at offset, whose event
// is larger than event hub hub accepts.
func (d *drain) oversized(ps *partitionState, offset int64, size int, hub string, err error) {
	tp := ps.tp
	if d.m.opts.OversizePolicy == OversizeSkip {
		ps.skip(offset)
		d.logger.WarnContext(context.Background(), "oversized record skipped (MIRROR_OVERSIZE_POLICY=skip)",
			"topic", tp.Topic, "partition", tp.Partition, "offset", offset, "value_bytes", size, "hub", hub)
		return
	}
	ps.fail(fmt.Errorf("record at offset %d (%d value bytes) is larger than event hub %q accepts; partition stopped before it (MIRROR_OVERSIZE_POLICY=skip leaves such records out): %w",
		offset, size, hub, err))
}
