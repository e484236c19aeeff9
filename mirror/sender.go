package mirror

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// senderQueue is the capacity of a sender's queue. A sender sends what is
// queued when its previous send returns, so the queue, with the run of at
// most senderTake items the sender took from it, also bounds a batch (about
// 2,000 events of 100 B, half the 1 MB a batch takes). A queue of
// 8,192 filled the batches but, before the in-flight weight was measured
// (weight.go), held far more memory than the bound accounted for (RSS
// doubled). Queues of 2,048 and 4,096 filled batches to 2,000–2,500 events
// and cut the CPU per 100 B record by a sixth, but while every fetch asked
// for 1 MiB the 100 B keyed case then peaked at 380–392 MB against 320–333
// with 1,024: more events in the senders' batches (the SDK keeps 512 B per
// keyed 100 B event) on top of the records waiting in fetches. Since fetches
// of small records are sized by their weight (prefetch.go), 2,048 fits.
const senderQueue = 2048

// senderTake is how many queued items a sender takes at once, at most: one
// lock of its queue (itemQueue).
const senderTake = 256

// item is one record's event on its way to Event Hubs, queued by value. It
// points at the record in its fetch's record slice (whose keys and values
// share one allocation too): a fetch's records and bytes are one
// allocation each and are freed together once its last record is in a
// batch (batched), instead of a copy of every record in an allocation of
// its own. The event is built when the record is added to a batch
// (EventBuilder).
type item struct {
	ps     *partitionState
	weight int64 // charged to the in-flight bound
	rec    *Record
}

// batched is what acknowledging or failing an event takes once it is in a
// batch, copied from its record as the event is built, while the record is
// in the cache: acknowledging a batch of 2,000 events read each record
// again, long after it left the cache (a twentieth of the CPU of a 100 B
// keyed drain). And a batch keeps no pointer to its records, so a fetch's
// memory can go once its last record is in a batch.
type batched struct {
	ps        *partitionState
	offset    int64
	timestamp int64 // as Record.Timestamp
	size      int64 // value bytes
	weight    int64 // charged to the in-flight bound
}

// batched returns what its event takes once in a batch.
func (it *item) batched() batched {
	return batched{ps: it.ps, offset: it.rec.Offset, timestamp: it.rec.Timestamp, size: int64(len(it.rec.Value)), weight: it.weight}
}

// sender publishes the events of one event hub partition, one batch at a
// time, in the order they were queued: so records with one key, which all go
// to one partition, keep their Kafka order.
type sender struct {
	d           *drain
	hub         string
	partitionID string
	in          *itemQueue
	// taken are items taken from in and not yet looked at, from
	// taken[nextTaken] on; its capacity is how many are taken at once.
	taken     []item
	nextTaken int
	// warmed sums what warm loads, so that the loads are kept.
	warmed uintptr
	// dead is set after a fatal error (hub missing, unauthorized); queued
	// items are then dropped without being sent.
	dead error
	// throttleLogged is set once a server-busy refusal was logged.
	throttleLogged bool
	// events builds each record's event as it is added to a batch.
	events EventBuilder
	// inBatch lists the events of the batch being filled or sent; reused
	// from batch to batch.
	inBatch []batched
}

// run sends batches until in is closed. No batch is started once workCtx
// ends: what is still queued then is left unsent (and so uncommitted) for
// the next drain. A batch already sent is given until sendCtx ends to be
// acknowledged, because a send given up on has an unknown outcome: its
// events may be stored anyway and would be sent again by the next drain.
func (s *sender) run(workCtx, sendCtx context.Context) {
	var carry item // rec is nil when there is none
	for {
		first := carry
		carry = item{}
		if first.rec == nil {
			it, ok := s.first()
			if !ok {
				return // the queue is closed
			}
			first = it
		}
		if s.skipping(&first) {
			continue
		}
		if workCtx.Err() != nil {
			s.unsent(first.batched())
			continue
		}
		batch, err := s.newBatch(workCtx)
		if err != nil {
			s.fail(err, first.batched())
			continue
		}
		evs := s.inBatch[:0]
		if s.add(batch, &first) {
			evs = append(evs, first.batched())
		}
		var lingerUntil time.Time // zero: send what is queued now
		if l := s.linger(); l > 0 {
			lingerUntil = time.Now().Add(l)
		}
		for {
			it, ok := s.next(lingerUntil)
			if !ok {
				break
			}
			if s.skipping(&it) {
				continue
			}
			if err := batch.Add(s.events.Build(it.rec)); err != nil {
				if errors.Is(err, ErrBatchFull) {
					carry = it
					break
				}
				s.oversized(&it, err)
				continue
			}
			evs = append(evs, it.batched())
		}
		s.inBatch = evs
		switch {
		case len(evs) == 0:
		case workCtx.Err() != nil:
			s.unsent(evs...)
		default:
			s.send(workCtx, sendCtx, batch, evs)
		}
	}
}

// unsent lets go of events that reading's end left unsent. They are not
// acknowledged, so the commit stops before the first of them and the next
// drain reads them again; the partition has not failed.
func (s *sender) unsent(evs ...batched) {
	for _, ev := range evs {
		s.d.inflight.Release(ev.weight)
	}
}

// sendContext returns the context of sends already on the wire: they may
// run until three quarters of the drain's margin after reading stops
// (workCtx's deadline), and until half the margin after ctx is canceled
// (SIGTERM), leaving the rest of the margin to the final commit.
func sendContext(ctx, workCtx context.Context, margin time.Duration) (context.Context, context.CancelFunc) {
	deadline, _ := workCtx.Deadline() // a drain's workCtx always has one
	sendCtx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline.Add(margin*3/4))
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(margin/2, cancel) })
	return sendCtx, func() {
		stop()
		cancel()
	}
}

// skipping drops it when its partition already failed or this sender is
// dead. A dropped record is never acknowledged, so nothing past it commits.
func (s *sender) skipping(it *item) bool {
	if s.d.zombie() {
		// The new owner may already have reconciled: never publish
		// after the claim is lost. Not acknowledged, so not committed.
		s.d.inflight.Release(it.weight)
		return true
	}
	if s.dead == nil && !it.ps.isFailed() {
		return false
	}
	if s.dead != nil {
		it.ps.fail(s.dead)
	}
	s.d.inflight.Release(it.weight)
	return true
}

// add adds the first item of a batch, applying the oversize policy when it
// does not fit even into an empty batch.
func (s *sender) add(batch Batch, it *item) bool {
	if err := batch.Add(s.events.Build(it.rec)); err != nil {
		s.oversized(it, err)
		return false
	}
	return true
}

// oversized applies the oversize policy to an event that fits no batch.
func (s *sender) oversized(it *item, err error) {
	defer s.d.inflight.Release(it.weight)
	if !errors.Is(err, ErrEventTooLarge) {
		it.ps.fail(fmt.Errorf("adding offset %d to a batch for event hub %q: %w", it.rec.Offset, s.hub, err))
		return
	}
	if err := s.d.oversized(it.ps, it.rec.Offset, len(it.rec.Value), s.hub, err); err != nil {
		it.ps.fail(err)
	}
}

// newBatch starts a batch, retrying transient errors until ctx ends.
func (s *sender) newBatch(ctx context.Context) (Batch, error) {
	var batch Batch
	err := s.retry(ctx, "creating a batch", func() error {
		var err error
		batch, err = s.d.m.sink.NewBatch(ctx, s.hub, s.partitionID)
		return err
	})
	return batch, err
}

// send publishes a batch and acknowledges its records, or fails them. Each
// attempt may run until sendCtx ends; none is started after workCtx ends.
func (s *sender) send(workCtx, sendCtx context.Context, batch Batch, evs []batched) {
	if s.d.dd != nil {
		markSending(evs)
	}
	refused := false // the last attempt was refused with server-busy
	err := s.retry(workCtx, "sending a batch", func() error {
		err := s.d.m.sink.Send(sendCtx, batch)
		refused = errors.Is(err, ErrThrottled)
		if err != nil && s.d.dd != nil && !errors.Is(err, ErrThrottled) && !isFatal(err) {
			// The batch may be stored: sending it again could store it
			// twice. The partitions fail, and the next drain reads back
			// what reached the hub.
			return finalError{fmt.Errorf("%w (outcome unknown: not sent again; the next drain reads back what reached the hub)", err)}
		}
		return err
	})
	if err != nil {
		if refused && workCtx.Err() != nil && (s.d.acked.Load() > 0 || errors.Is(workCtx.Err(), context.Canceled)) {
			// Throttled until reading ended, in a drain that made
			// progress or was canceled: the namespace is at its quota,
			// not broken. The batch was refused, so not stored: the next
			// drain sends it.
			s.unsent(evs...)
			return
		}
		s.fail(fmt.Errorf("event hub %q partition %s: %w", s.hub, s.partitionID, err), evs...)
		return
	}
	s.d.acked.Add(1)
	var weight int64
	var lat latencyCounts
	now := time.Now()
	for run := evs; len(run) > 0; {
		n := 1
		for n < len(run) && run[n].ps == run[0].ps {
			n++
		}
		run[0].ps.ack(run[:n], now)
		run = run[n:]
	}
	for run := evs; len(run) > 0; {
		// Records stamped in the same millisecond (a busy producer's,
		// by the hundred) are counted at once.
		n := 1
		for n < len(run) && run[n].timestamp == run[0].timestamp {
			n++
		}
		lat.observe(now.Sub(time.UnixMilli(run[0].timestamp)), int64(n))
		run = run[n:]
	}
	for i := range evs {
		weight += evs[i].weight
	}
	s.d.latency.add(&lat)
	if win := s.d.winLatency.Load(); win != nil {
		win.add(&lat)
	}
	s.d.inflight.Release(weight)
}

// markSending records, per partition, the highest offset among events
// about to be sent: a drain that stops with records left unsent above
// everything it sent can still end cleanly.
func markSending(evs []batched) {
	var ps *partitionState
	var highest int64
	for _, ev := range evs {
		if ev.ps != ps {
			if ps != nil {
				ps.sending(highest)
			}
			ps, highest = ev.ps, ev.offset
		}
		highest = max(highest, ev.offset)
	}
	if ps != nil {
		ps.sending(highest)
	}
}

// fail fails the partitions of evs, which are then not acknowledged.
func (s *sender) fail(err error, evs ...batched) {
	if isFatal(err) {
		s.dead = err
	}
	for _, ev := range evs {
		ev.ps.fail(err)
		s.d.inflight.Release(ev.weight)
	}
}

// retry calls op until it succeeds, fails fatally, or ctx ends, backing off
// between attempts.
func (s *sender) retry(ctx context.Context, what string, op func() error) error {
	backoff := s.d.m.opts.RetryBackoff
	throttled := false
	giveUp := func(attempt int, err error) error {
		if throttled && !errors.Is(err, ErrThrottled) {
			// The last attempt ran into the deadline; say why it was late.
			return fmt.Errorf("%s: gave up at the drain's deadline after %d attempts (%w before): %w", what, attempt, ErrThrottled, err)
		}
		return fmt.Errorf("%s: gave up at the drain's deadline after %d attempts: %w", what, attempt, err)
	}
	where := Outage{Hub: s.hub, HubPartition: s.partitionID}
	for attempt := 1; ; attempt++ {
		err := op()
		if err == nil {
			s.d.live.succeeded(where)
			return nil
		}
		var final finalError
		if isFatal(err) || errors.As(err, &final) {
			return err
		}
		busy := errors.Is(err, ErrThrottled)
		if busy {
			s.d.throttled.Add(1)
		}
		if ctx.Err() != nil {
			return giveUp(attempt, err)
		}
		pause := backoff
		if !busy {
			// Throttling at the namespace's quota is progress at the
			// quota, not an outage (the report counts it).
			where.Kind = eventHubsKind(err)
			s.d.live.failed(where, err)
		}
		switch {
		case busy && s.throttleLogged:
			// At the namespace's quota every sender is refused often:
			// the first refusal per sender and drain is logged, the rest
			// counted in the report.
			s.d.logger.DebugContext(ctx, "event hubs throttled; retrying", "hub", s.hub, "partition", s.partitionID, "attempt", attempt, "err", err)
		default:
			s.throttleLogged = s.throttleLogged || busy
			s.d.logger.WarnContext(ctx, "event hubs error; retrying", "hub", s.hub, "partition", s.partitionID, "attempt", attempt, "err", err)
		}
		if busy {
			pause = throttlePause(backoff)
		}
		throttled = throttled || busy
		began := time.Now()
		slept := sleep(ctx, pause)
		if busy {
			s.d.throttledWait.Add(int64(time.Since(began)))
		}
		if !slept {
			return giveUp(attempt, err)
		}
		backoff = min(backoff*2, s.d.m.opts.MaxRetryBackoff)
	}
}

// maxThrottlePause caps the pause after a send refused with server-busy.
// The service admits a namespace's ingress against a short window running
// total of its traffic (see emulator.Quota): a sender that waits much longer
// than that window leaves quota unused, while a refused send costs no
// quota. The service's own text asks for 4 seconds; with one sender per hub
// partition, pauses of up to a second, spread by jitter, keep the namespace
// at its quota (docs/performance.md, "At the namespace's throughput quota") and do not
// hold up the senders of partitions that were not refused.
const maxThrottlePause = time.Second

// throttlePause is the pause after a throttled send: backoff, at most
// maxThrottlePause, spread by ±20% so that the senders refused together do
// not come back together.
func throttlePause(backoff time.Duration) time.Duration {
	p := min(backoff, maxThrottlePause)
	return time.Duration(float64(p) * (0.8 + 0.4*rand.Float64()))
}

// finalError is an error the sender must not retry, although it is not
// fatal for the hub: only the batch's partitions fail.
type finalError struct{ error }

func (e finalError) Unwrap() error { return e.error }

// isFatal reports errors that retrying cannot fix.
func isFatal(err error) bool {
	return errors.Is(err, ErrHubNotFound) || errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrEventTooLarge)
}
