package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// eventOverhead approximates the bytes an event's encoding adds to its
// record's key and value: properties, message id and AMQP framing. It only
// decides when a record is checked against an empty batch (fitsHub); the
// in-flight bound is charged with InFlightWeight.
const eventOverhead = 256

// commitTimeout bounds one periodic commit.
const commitTimeout = 5 * time.Second

// Drain copies records from the consumer group's committed offsets into
// Event Hubs until every owned partition is caught up or a limit is reached,
// commits exactly what Event Hubs acknowledged, and reports what it did.
//
// run names the drain in reports and logs. The returned error is non-nil only
// when the drain could not start (Kafka unreachable, no group membership);
// failures of single topics and partitions are in the report.
func (m *Mirror) Drain(ctx context.Context, run string, lim Limits) (*Report, error) {
	start := time.Now()
	rep := &Report{Run: run, Started: start}
	defer func() { rep.Duration = time.Since(start) }()

	maxDuration := lim.MaxDuration
	if maxDuration <= 0 {
		maxDuration = time.Minute
	}
	deadline := start.Add(maxDuration)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	// Keep a margin so that the final commit happens inside the deadline.
	margin := min(max(time.Until(deadline)/10, 100*time.Millisecond), 5*time.Second)
	workCtx, cancelWork := context.WithDeadline(ctx, deadline.Add(-margin))
	win := lim.window
	if win != nil {
		// A drain handed over from invocation to invocation: each
		// invocation's MIRROR_MAX_DURATION bounds its window (see
		// Service.DrainFollowing), the window bounds the drain.
		cancelWork()
		deadline, margin = time.Time{}, handoverMargin
		workCtx, cancelWork = context.WithCancel(ctx)
	} else if !lim.FollowUntil.IsZero() {
		win = newFollowWindow(lim.FollowUntil, 0)
		defer win.stop()
	}
	defer cancelWork()

	mirrored, err := m.selectTopics(workCtx, nil)
	if err != nil {
		rep.Stopped = StopFailed
		return rep, err
	}
	topics := narrowed(mirrored, lim.Topics)
	if topics, rep.Paused, rep.PausedSince, err = m.dropPaused(workCtx, topics); err != nil {
		rep.Stopped = StopFailed
		return rep, err
	}
	hubs, names := m.resolveHubs(workCtx, topics, rep)
	if len(names) == 0 && len(rep.Paused) == 0 {
		rep.Stopped = StopNothingToDo
		if len(rep.HubErrors) > 0 {
			rep.Stopped = StopFailed // every topic's hub failed
		}
		return rep, nil
	}

	// The claim subscribes to every mirrored topic, also those this
	// drain does not read (paused, narrowed out, without a hub): Kafka
	// expires the committed offsets of topics a group with members does
	// not subscribe to (KIP-496), which would lose a long pause's
	// position; and drains, catch-ups and resets of this process share
	// one subscription, so none of them rebalances the others.
	mark := m.holdMark() // before the claim reads committed offsets
	early := m.readWatermarks(workCtx, partitionsOf(topics, names))
	claim, err := m.source.Claim(workCtx, topicNames(mirrored))
	if err != nil {
		rep.Stopped = StopFailed
		return rep, fmt.Errorf("joining consumer group: %w", err)
	}
	defer func() {
		releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := claim.Release(releaseCtx); err != nil {
			m.opts.Logger.WarnContext(ctx, "leaving consumer group", "run", run, "err", err)
		}
	}()

	assigned := claim.Assigned()
	tps := make([]TopicPartition, 0, len(assigned))
	for tp := range assigned {
		if slices.Contains(names, tp.Topic) {
			tps = append(tps, tp)
		}
	}
	sortTopicPartitions(tps)
	got, busy := m.hold(run, tps, mark)
	var d *drain
	defer func() { m.release(d.stillHeld(got)) }()
	for _, tp := range busy {
		rep.Partitions = append(rep.Partitions, PartitionReport{
			Topic: tp.Topic, Partition: tp.Partition, Hub: m.router.Hub(tp.Topic),
			FirstOffset: -1, LastOffset: -1, Committed: assigned[tp], Busy: true,
		})
	}
	if len(got) == 0 {
		rep.Stopped = StopNothingToDo
		if len(names) == 0 && len(rep.HubErrors) > 0 {
			// The claim was held for the paused topics only: every
			// topic to read lacks its hub.
			rep.Stopped = StopFailed
		}
		if len(busy) > 0 {
			rep.Stopped = StopBusy
			m.busyLag(workCtx, rep)
		}
		return rep, nil
	}

	d = &drain{
		m:         m,
		name:      run,
		lim:       lim,
		claim:     claim,
		hubs:      hubs,
		inflight:  semaphore.NewWeighted(m.opts.InFlightBytes),
		fetches:   newByteBudget(fetchBudget(m.opts.InFlightBytes)),
		states:    make(map[TopicPartition]*partitionState, len(got)),
		senders:   make(map[string][]*sender),
		rep:       rep,
		logger:    m.opts.Logger.With("run", run),
		stoppedCh: make(chan struct{}),
		ids:       make(map[string]string, len(topics)),
		topics:    topics,
		mirrored:  mirrored,
		released:  make(map[TopicPartition]bool),
		live:      newLiveDrain(m.live.recover),
		win:       win,
		clock:     newReadClock(),
	}
	if lim.window != nil {
		d.winLatency.Store(new(latencyHistogram))
	}
	for _, t := range topics {
		d.ids[t.Name] = t.ID
	}
	if err := d.prepare(workCtx, got, assigned, early); err != nil {
		rep.Stopped = StopFailed
		return rep, err
	}
	m.live.start(d, deadline)
	defer m.live.end(d)
	if lim.started != nil {
		lim.started(d)
	}
	d.run(ctx, workCtx, margin)
	return rep, nil
}

// resolveHubs routes each topic to its hub and checks that the hub exists.
// Topics whose hub cannot be used are reported and left out of the drain, so
// they are neither read nor committed and the other topics go on.
func (m *Mirror) resolveHubs(ctx context.Context, topics []Topic, rep *Report) (map[string]Hub, []string) {
	looked := m.lookUpHubs(ctx, topics)
	hubs := make(map[string]Hub)
	failed := make(map[string]error)
	var names []string
	for _, t := range topics {
		name := m.router.Hub(t.Name)
		if err, ok := failed[name]; ok {
			rep.Errors = append(rep.Errors, fmt.Sprintf("topic %q -> event hub %q: %v", t.Name, name, err))
			rep.HubErrors = append(rep.HubErrors, HubError{Topic: t.Name, Hub: name, Kind: eventHubsKind(err), Error: err.Error()})
			continue
		}
		if _, ok := hubs[name]; !ok {
			hub, err := looked[name].hub, looked[name].err
			if err == nil && len(hub.PartitionIDs) == 0 {
				err = errors.New("event hub reports no partitions")
			}
			if err != nil {
				if errors.Is(err, ErrHubNotFound) {
					err = fmt.Errorf("event hub %q does not exist: create it or add a route (MIRROR_ROUTES); topic not mirrored and not committed: %w", name, ErrHubNotFound)
				}
				failed[name] = err
				rep.Errors = append(rep.Errors, fmt.Sprintf("topic %q -> event hub %q: %v", t.Name, name, err))
				rep.HubErrors = append(rep.HubErrors, HubError{Topic: t.Name, Hub: name, Kind: eventHubsKind(err), Error: err.Error()})
				continue
			}
			hubs[name] = hub
		}
		names = append(names, t.Name)
	}
	return hubs, names
}

// drain is the state of one running drain.
type drain struct {
	m       *Mirror
	name    string
	lim     Limits
	claim   Claim
	hubs    map[string]Hub
	states  map[TopicPartition]*partitionState
	order   []*partitionState
	senders map[string][]*sender // hub -> one sender per hub partition
	parts   map[string]*partitioner
	// fits is, per hub, the largest estimated record size known to fit.
	fits   map[string]*atomic.Int64
	rep    *Report
	logger *slog.Logger

	// pipe adapts prefetches to the round trip to Kafka (prefetch.go).
	pipe fetchPipeline

	inflight *semaphore.Weighted
	// fetches is the fetch budget: what fetches and the records not yet
	// handed over hold (fetchbudget.go).
	fetches *byteBudget
	records atomic.Int64 // records handed to senders
	bytes   atomic.Int64
	acked   atomic.Int64 // batches Event Hubs accepted
	// throttled counts sends refused with server-busy, throttledWait the
	// nanoseconds senders backed off after them.
	throttled, throttledWait atomic.Int64
	// clock is where the readers spent their time (Report.ReadTime).
	clock *readClock

	commitMu sync.Mutex
	// writer is the drain's commit token and, per partition, the token
	// of the commit that stands (acked.go).
	writer commitWriter

	// ids are the topics' ids (KIP-516) when the drain started, "" where
	// the broker reports none.
	ids    map[string]string
	topics []Topic
	// mirrored are the topics the claim subscribes to.
	mirrored []Topic
	// firstDeployment is set when KAFKA_START_OFFSET=latest applies: the
	// group has no committed offset on any mirrored partition.
	firstDeployment bool
	identityMu      sync.Mutex
	identityErr     error // the last topic identity check's error, nil after a success

	// dd is the deduplication state; nil when Options.Deduplicate is off.
	dd *dedup
	// live follows the sends and fetches that keep failing (status).
	live *liveDrain
	// published is what the live publisher last wrote (peers.go).
	published livePublisher
	// latency is Event Hubs' acknowledgement time minus the Kafka
	// timestamp of each record mirrored.
	latency latencyHistogram
	// winLatency is the latency of the records mirrored in the current
	// invocation's window of a drain handed over (nil for other drains).
	winLatency atomic.Pointer[latencyHistogram]
	// win ends a following drain's reading; nil when it does not follow.
	win *followWindow
	// repMu orders the end of the drain (final commit, report) with the
	// window reports taken while it runs (see snapshot).
	repMu sync.Mutex

	stopOnce  sync.Once
	stopped   string
	stoppedCh chan struct{}

	// released are partitions handed back to the process before the end
	// (their topic was paused during the drain); guarded by commitMu.
	released map[TopicPartition]bool
}

// stop ends reading for the whole drain; the first reason wins.
func (d *drain) stop(reason string) {
	d.stopOnce.Do(func() {
		d.stopped = reason
		close(d.stoppedCh)
	})
}

func (d *drain) isStopped() bool {
	select {
	case <-d.stoppedCh:
		return true
	default:
		return false
	}
}

// run reads, publishes and commits until the drain ends, then fills the report.
func (d *drain) run(ctx, workCtx context.Context, margin time.Duration) {
	readCtx, cancelRead := context.WithCancel(workCtx)
	defer cancelRead()
	go func() {
		select {
		case <-d.claim.Lost():
			d.stop(StopRebalanced)
		case <-d.stoppedCh:
		case <-readCtx.Done():
		}
		cancelRead()
	}()

	senderWork, sendCtx, cancelSend := d.senderContexts(ctx, workCtx, margin)
	defer cancelSend()
	var senders sync.WaitGroup
	for _, ss := range d.senders {
		for _, s := range ss {
			senders.Add(1)
			go func() {
				defer senders.Done()
				s.run(senderWork, sendCtx)
			}()
		}
	}

	// The committer commits every CommitInterval. A failed commit does not
	// stop later ones; the claim keeps commits in order (a later one is not
	// sent while an earlier request may still land), so none can move the
	// offset backwards.
	stopCommitter := make(chan struct{})
	committerDone := d.every(workCtx, stopCommitter, func() {
		commitCtx, cancel := context.WithTimeout(context.WithoutCancel(workCtx), commitTimeout)
		defer cancel()
		if err := d.commit(commitCtx); err != nil {
			d.logger.WarnContext(ctx, "periodic commit failed", "err", err)
		}
	})

	// The identity watcher lists the topics every CommitInterval and
	// confirms that each still has the id it had at the start; only records
	// read before a confirmation are committed.
	watcherDone := d.every(workCtx, stopCommitter, func() {
		if err := d.checkIdentity(workCtx); err != nil && workCtx.Err() == nil {
			d.logger.WarnContext(ctx, "topic identity check failed; commits wait for the next one", "err", err)
		}
	})

	// The pause watcher reads the pause records every few seconds: a topic
	// paused during the drain stops being read, what was read is sent and
	// committed, and its partitions are handed back (see handBackPaused).
	pausesDone := d.everyInterval(workCtx, stopCommitter, pauseCheckInterval, func() { d.checkPauses(workCtx) })
	// The live publisher shares the drain's ongoing outages with the
	// other instances' status (peers.go).
	liveDone := d.everyInterval(workCtx, stopCommitter, livePublishCheck, func() { d.publishLive(workCtx) })

	followCtx, cancelFollow := d.followContext(readCtx)
	defer cancelFollow()
	var readers sync.WaitGroup
	for _, ps := range d.order {
		if ps.isFailed() {
			continue
		}
		readers.Add(1)
		go func() {
			defer readers.Done()
			d.read(followCtx, ps)
		}()
	}
	readers.Wait()
	if d.lim.window != nil {
		// A drain handed over whose readers all stopped (their topics
		// paused, their partitions failed) keeps its claim for its
		// follower, which re-plans (a resume, a retry, a reset) or hands
		// it over (follower.go).
		select {
		case <-followCtx.Done():
		case <-d.stoppedCh:
		}
	}
	// The final identity check needs only the reads, which have ended: it
	// runs while the senders send what the readers handed over, so the
	// final commit waits for one round trip to Kafka less.
	identityCtx, cancelIdentity := context.WithTimeout(context.WithoutCancel(ctx), max(margin, time.Second))
	defer cancelIdentity()
	identityDone := make(chan error, 1)
	go func() { identityDone <- d.checkIdentity(identityCtx) }()
	for _, ss := range d.senders {
		for _, s := range ss {
			s.in.close()
		}
	}
	senders.Wait()
	close(stopCommitter)
	<-committerDone
	<-watcherDone
	<-pausesDone
	<-liveDone

	if !d.isStopped() {
		switch {
		case ctx.Err() != nil:
			d.stop(StopCanceled)
		case workCtx.Err() != nil:
			d.stop(StopMaxDuration)
		case d.followEnded(ctx, workCtx):
			d.stop(StopFollowed)
		default:
			d.stop(StopCaughtUp)
		}
	}

	// The final commit gets its own short deadline, even when ctx was
	// canceled: what Event Hubs acknowledged must be committed.
	finalCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(margin, time.Second))
	defer cancel()
	d.repMu.Lock()
	defer d.repMu.Unlock()
	if d.dd != nil {
		d.dd.final.Store(true) // every sender has ended
	}
	// The log ends for the lag are read beside the commit (watermarks.go).
	ends := d.m.readWatermarks(finalCtx, d.partitions())
	if err := <-identityDone; err != nil {
		d.rep.Errors = append(d.rep.Errors, fmt.Sprintf("final %v: records read since the last check are not committed", err))
	}
	if err := d.commit(finalCtx); err != nil {
		d.rep.Errors = append(d.rep.Errors, fmt.Sprintf("final commit: %v (acknowledged records will be mirrored again)", err))
	}
	d.keepAcked()
	d.report(finalCtx, ends)
	d.publishLive(ctx) // after the commit: clears outages that ended
}

// read fetches one partition and hands its records to the senders.
func (d *drain) read(ctx context.Context, ps *partitionState) {
	offset := ps.start
	ps.mu.Lock()
	end := ps.end
	ps.mu.Unlock()
	backoff := d.m.opts.RetryBackoff
	defer d.clock.begin()()
	pf := &prefetcher{d: d, tp: ps.tp}
	defer pf.stop()
	run := d.newHandOverRun(ps.hub)
	for offset >= 0 && !ps.halted() && ctx.Err() == nil {
		if offset >= end && !d.keepFollowing(ctx) {
			return // caught up
		}
		t0 := time.Now()
		f, charge, err := pf.fetch(ctx, offset)
		waited(&d.clock.kafka, t0)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, ErrOffsetOutOfRange) {
				if offset = d.outOfRange(ctx, ps, offset); offset < 0 {
					return
				}
				continue
			}
			if d.followStopping() {
				return // the follow window's end cut the long poll: not a failure
			}
			d.live.failed(Outage{Kind: KindKafka, Topic: ps.tp.Topic, Partition: ps.tp.Partition}, err)
			d.logger.WarnContext(ctx, "kafka fetch failed; retrying", "topic", ps.tp.Topic, "partition", ps.tp.Partition, "offset", offset, "err", err)
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(backoff*2, d.m.opts.MaxRetryBackoff)
			continue
		}
		backoff = d.m.opts.RetryBackoff
		d.live.succeeded(Outage{Topic: ps.tp.Topic, Partition: ps.tp.Partition})
		end = f.Watermarks.End
		ps.setEnd(end)
		if len(f.Records) > 0 && f.Next > offset && (f.Next < end || d.keepFollowing(ctx)) {
			pf.start(ctx, f.Next)
		}
		run.fetchCharge = charge
		handed := d.handOver(ctx, ps, run, f.Records)
		d.releaseFetch(run.fetchCharge) // what the records handed over did not give back
		run.fetchCharge = 0
		if !handed {
			return
		}
		ps.advance(f.Next)
		if f.Next > offset {
			offset = f.Next
		} else if len(f.Records) == 0 && !d.keepFollowing(ctx) {
			// Nothing returned and no progress: the partition is at its
			// stable end for now.
			return
		}
	}
}

// sleep waits for d or until ctx ends; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// every runs fn every CommitInterval in a goroutine until stop closes or
// ctx ends; the returned channel closes when the goroutine has returned.
func (d *drain) every(ctx context.Context, stop <-chan struct{}, fn func()) <-chan struct{} {
	return d.everyInterval(ctx, stop, d.m.opts.CommitInterval, fn)
}

// everyInterval is every with its own interval.
func (d *drain) everyInterval(ctx context.Context, stop <-chan struct{}, interval time.Duration, fn func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				fn()
			}
		}
	}()
	return done
}
