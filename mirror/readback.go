package mirror

import (
	"slices"
	"time"
)

// readBackKey names one read-back: a hub partition read from a floor.
type readBackKey struct {
	hub, partitionID string
	after            int64
}

// readBackKept is the progress of a read-back that did not finish.
type readBackKept struct {
	events  []readBack
	reached int64
	used    time.Time
}

// Bounds of the read-back progress a Mirror keeps between drains.
const (
	readBackKeptEvents = 1 << 20
	readBackKeptFor    = 15 * time.Minute
)

// readBackProgress returns what earlier drains of this process read back
// from key and the sequence number they reached (key.after when none).
func (m *Mirror) readBackProgress(key readBackKey) ([]readBack, int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, ok := m.readBacks[key]
	if !ok {
		return nil, key.after
	}
	return slices.Clone(k.events), k.reached
}

// keepReadBackProgress stores how far a read-back of key got, so that a
// drain whose read-back ran out of time does not leave the next one the
// same range to read. Progress older than readBackKeptFor is dropped, and
// none is kept past readBackKeptEvents events in all.
func (m *Mirror) keepReadBackProgress(key readBackKey, events []readBack, reached int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	total := len(events)
	for k, v := range m.readBacks {
		if k != key && now.Sub(v.used) > readBackKeptFor {
			delete(m.readBacks, k)
			continue
		}
		if k != key {
			total += len(v.events)
		}
	}
	if reached <= key.after || total > readBackKeptEvents {
		delete(m.readBacks, key)
		return
	}
	m.readBacks[key] = &readBackKept{events: events, reached: reached, used: now}
}
