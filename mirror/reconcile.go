package mirror

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// StoredEvent is an event read back from an event hub partition.
type StoredEvent struct {
	Sequence   int64
	Body       []byte
	Properties map[string]any
	MessageID  string
}

// HubReader reads back what an event hub holds. A [Sink] that implements
// it lets drains deduplicate (Options.Deduplicate). Reading needs the
// Listen right; errors wrap ErrUnauthorized when it is missing.
type HubReader interface {
	// LastSequence returns the sequence number of the last event enqueued
	// in one partition of hub, -1 when the partition holds none.
	LastSequence(ctx context.Context, hub, partitionID string) (int64, error)
	// ReadAfter calls fn, in order, for each event of one partition of hub
	// whose sequence number is above after and at most until. It returns
	// nil only when it reached until; events passed to fn before an error
	// were read.
	ReadAfter(ctx context.Context, hub, partitionID string, after, until int64, fn func(StoredEvent)) error
	// CheckListen returns an error wrapping ErrUnauthorized when the
	// credentials cannot read one partition of hub. at is the sequence
	// number of an event the partition holds (the check then returns as
	// soon as it arrives), -1 when none is known.
	CheckListen(ctx context.Context, hub, partitionID string, at int64) error
}

// dedup is one drain's deduplication state (Options.Deduplicate).
//
// Every commit stores, beside the offset, for each hub partition the
// partition's records may go to, a floor: a sequence number read before
// the drain published anything there. A drain that ends having committed
// everything it sent marks its last commit clean. A drain that takes over a
// partition whose last commit is not clean reads each hub partition from
// the floor to its current end and skips the records whose events it read
// back, matched by provenance (topic, partition, offset, message id) and by
// a digest of body and properties. Any doubt sends the record again.
type dedup struct {
	reader HubReader
	// floors are, per hub and hub partition id, the last sequence number
	// before this drain sent anything; missing where it could not be read.
	floors map[string]map[string]int64
	parts  map[*partitionState]*dedupPart
	final  atomic.Bool // set before the drain's final commit
	warned atomic.Bool // the metadata size warning was logged

	mu sync.Mutex // guards the dedupParts' fields
}

// dedupPart is the deduplication state of one Kafka partition.
type dedupPart struct {
	// metaClean: the metadata stored with the group's commit says clean.
	metaClean bool
	// unresolved: the stored metadata is not clean and this drain could
	// not settle it (the read-back failed or the partition failed before
	// it was read): the drain must not replace that metadata, so the
	// next drain still reads back.
	unresolved bool
	// inherited are the floors of the last, unclean commit; from is the
	// lowest offset the read-back may find (an offset reset keeps the
	// floors of the position it replaced and sets it: see commitMeta.From).
	inherited map[string]int64
	from      int64
	// present maps offsets of records found in the hub to their digest.
	present    map[int64]uint64
	presentMax int64
	found      int64 // records not sent again because they were found
}

// reconcileTimeout bounds the reading of a drain's reconciliation.
func reconcileTimeout(d *drain) time.Duration {
	return min(max(d.lim.MaxDuration/4, 2*time.Second), 30*time.Second)
}

// startDedup reads the floors, reconciles partitions whose last commit was
// not clean and commits each active partition's position with the new
// floors before anything is sent. A partition whose floors or read-back
// failed (the service did not answer) sends nothing in this drain: sending
// could publish a record twice, and the next drain tries again. What cannot
// be read at all (no Listen right, a commit without floors) is reported and
// makes those partitions at-least-once; nothing is ever skipped unread.
func (d *drain) startDedup(ctx context.Context, meta map[TopicPartition]string) {
	if !d.m.opts.Deduplicate {
		return
	}
	reader, ok := d.m.sink.(HubReader)
	if !ok {
		d.rep.Deduplication = "MIRROR_DEDUPLICATE is on but the Event Hubs sink cannot read events; at-least-once"
		return
	}
	dd := &dedup{reader: reader, floors: make(map[string]map[string]int64), parts: make(map[*partitionState]*dedupPart)}
	d.dd = dd

	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, reconcileTimeout(d))
	defer cancel()
	var problems []string
	var pmu sync.Mutex
	problem := func(s string) {
		pmu.Lock()
		problems = append(problems, s)
		pmu.Unlock()
	}

	// Floors of every hub partition, read in parallel.
	var wg sync.WaitGroup
	var fmu sync.Mutex
	unread := make(map[string]map[string]error) // hub -> partition id -> why its floor or read-back failed
	failRead := func(hub, id string, err error) {
		fmu.Lock()
		defer fmu.Unlock()
		if unread[hub] == nil {
			unread[hub] = make(map[string]error)
		}
		unread[hub][id] = err
	}
	for name := range d.hubs {
		if d.senders[name] != nil {
			dd.floors[name] = make(map[string]int64)
		}
	}
	for name, hub := range d.hubs {
		if d.senders[name] == nil {
			continue
		}
		for _, id := range hub.PartitionIDs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				seq, err := reader.LastSequence(ctx, name, id)
				if err != nil {
					problem(fmt.Sprintf("reading the last sequence number of event hub %q partition %s: %v", name, id, err))
					if !errors.Is(err, ErrUnauthorized) {
						failRead(name, id, fmt.Errorf("reading its last sequence number: %w", err))
					}
					return
				}
				fmu.Lock()
				dd.floors[name][id] = seq
				fmu.Unlock()
			}()
		}
	}
	wg.Wait()
	// The Listen check, once the floors are known.
	for name, hub := range d.hubs {
		if d.senders[name] == nil || len(hub.PartitionIDs) == 0 {
			continue
		}
		// A partition holding an event answers at once.
		id, at := hub.PartitionIDs[0], int64(-1)
		for _, pid := range hub.PartitionIDs {
			if f, ok := dd.floors[name][pid]; ok && f > at {
				id, at = pid, f
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.m.checkListen(ctx, reader, name, id, at); err != nil {
				problem(listenProblem(name))
			}
		}()
	}
	wg.Wait()

	// Which partitions need reconciling, and from where.
	type span struct{ after, until int64 }
	reads := make(map[string]map[string]*span)
	byTP := make(map[TopicPartition]*partitionState)
	for _, ps := range d.order {
		cm, ours := parseCommitMeta(meta[ps.tp])
		dp := &dedupPart{metaClean: cm.Clean, presentMax: -1}
		dd.parts[ps] = dp
		if ps.isFailed() {
			// Nothing is read or sent; what the last commit says stays
			// for the next drain.
			dp.unresolved = ours && !cm.Clean
			continue
		}
		// A partition that resumes past a retention gap (start above the
		// committed offset) is read back too: what the earlier drain
		// published above the gap is still in the hub.
		if cm.Clean || ps.startCommitted == NoOffset || ps.start < ps.startCommitted || ps.note != "" {
			continue
		}
		if cm.Floors == nil || cm.Hub != ps.hub || cm.TopicID != d.ids[ps.tp.Topic] {
			problem(fmt.Sprintf("%s: the last commit was not a clean end and carries no usable sequence numbers; records after offset %d may be sent twice", ps.tp, ps.start))
			continue
		}
		dp.inherited, dp.from = cm.Floors, max(cm.From, ps.start)
		byTP[ps.tp] = ps
		for id, after := range cm.Floors {
			until, ok := dd.floors[ps.hub][id]
			if !ok {
				continue // already reported
			}
			if reads[ps.hub] == nil {
				reads[ps.hub] = make(map[string]*span)
			}
			if sp := reads[ps.hub][id]; sp != nil {
				sp.after = min(sp.after, after)
			} else {
				reads[ps.hub][id] = &span{after: after, until: until}
			}
		}
	}
	began := time.Now()
	var events atomic.Int64
	for hub, ids := range reads {
		for id, sp := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// A read-back that ran out of time in an earlier drain of
				// this process goes on where it stopped.
				key := readBackKey{hub: hub, partitionID: id, after: sp.after}
				kept, reached := d.m.readBackProgress(key)
				for _, rb := range kept {
					dd.saw(byTP, hub, rb)
				}
				var err error
				if reached < sp.until {
					err = reader.ReadAfter(ctx, hub, id, reached, sp.until, func(ev StoredEvent) {
						events.Add(1)
						if rb, ok := readBackOf(ev); ok {
							dd.saw(byTP, hub, rb)
							kept = append(kept, rb)
						}
						reached = max(reached, ev.Sequence)
					})
				}
				d.m.keepReadBackProgress(key, kept, reached)
				switch {
				case errors.Is(err, ErrUnauthorized):
					problem(listenProblem(hub))
				case err != nil:
					problem(fmt.Sprintf("reconciling event hub %q partition %s: %v (read up to sequence number %d of %d; the next drain goes on from there)", hub, id, err, reached, sp.until))
					failRead(hub, id, fmt.Errorf("reading back what earlier drains published: %w", err))
				}
			}()
		}
	}
	wg.Wait()
	if len(byTP) > 0 {
		found := 0
		dd.mu.Lock()
		for _, dp := range dd.parts {
			found += len(dp.present)
		}
		dd.mu.Unlock()
		d.logger.InfoContext(ctx, "reconciled after an unclean end", "partitions", len(byTP), "events_read", events.Load(), "records_found", found, "duration_ms", time.Since(began).Milliseconds())
	}

	d.failUnread(unread)
	// The commit has time of its own: a read-back that used its whole
	// bound must not leave it none.
	commitCtx, cancelCommit := context.WithTimeout(parent, commitTimeout)
	defer cancelCommit()
	d.intentCommit(commitCtx, problem)
	slices.Sort(problems)
	problems = slices.Compact(problems)
	for _, p := range problems {
		d.logger.WarnContext(ctx, "deduplication", "problem", p)
	}
	if len(problems) > 0 {
		d.rep.Deduplication = problems[0]
		if len(problems) > 1 {
			d.rep.Deduplication += fmt.Sprintf(" (and %d more problems)", len(problems)-1)
		}
	}
}

// failUnread fails, before anything is sent, the partitions that may publish
// to a hub partition whose floor could not be read (their commits could not
// store one) or that needed a read-back of one that failed.
func (d *drain) failUnread(unread map[string]map[string]error) {
	for _, ps := range d.order {
		ids := unread[ps.hub]
		if len(ids) == 0 || ps.isFailed() {
			continue
		}
		// The hub partitions ps may publish to, and those it was to read back.
		for _, id := range slices.Concat(d.candidates(ps), slices.Collect(maps.Keys(d.dd.parts[ps].inherited))) {
			if err, ok := ids[id]; ok {
				ps.fail(fmt.Errorf("deduplication: event hub %q partition %s: %w; nothing sent, the next drain tries again", ps.hub, id, err))
				d.dd.mu.Lock()
				dp := d.dd.parts[ps]
				dp.unresolved = !dp.metaClean
				d.dd.mu.Unlock()
				break
			}
		}
	}
}

// readBack is what reconciliation keeps of an event read back: the record
// it stands for and a digest of its content.
type readBack struct {
	tp     TopicPartition
	offset int64
	digest uint64
}

// readBackOf returns what ev stands for, ok false when it carries no
// provenance the mirror wrote (its message id must match it).
func readBackOf(ev StoredEvent) (rb readBack, ok bool) {
	topic, _ := ev.Properties[PropTopic].(string)
	part, ok1 := ev.Properties[PropPartition].(int64)
	off, ok2 := ev.Properties[PropOffset].(int64)
	if !ok1 || !ok2 || part < 0 || part > 1<<31-1 || ev.MessageID != MessageID(topic, int32(part), off) {
		return rb, false
	}
	return readBack{tp: TopicPartition{Topic: topic, Partition: int32(part)}, offset: off, digest: eventDigest(ev.Body, ev.Properties)}, true
}

// saw records an event read back from hub when it is one of a reconciled
// partition's records at or above the lowest offset it may find.
func (dd *dedup) saw(byTP map[TopicPartition]*partitionState, hub string, rb readBack) {
	ps := byTP[rb.tp]
	if ps == nil || ps.hub != hub {
		return
	}
	dd.mu.Lock()
	defer dd.mu.Unlock()
	dp := dd.parts[ps]
	if rb.offset < dp.from {
		return
	}
	if dp.present == nil {
		dp.present = make(map[int64]uint64)
	}
	dp.present[rb.offset] = rb.digest
	dp.presentMax = max(dp.presentMax, rb.offset)
}

// already reports whether r's event was read back from the hub, with the
// same provenance and content: then it is not sent again.
func (dd *dedup) already(ps *partitionState, r *Record) bool {
	dd.mu.Lock()
	dp := dd.parts[ps]
	if dp == nil || dp.present == nil {
		dd.mu.Unlock()
		return false
	}
	dg, ok := dp.present[r.Offset]
	dd.mu.Unlock()
	if !ok {
		return false
	}
	ev := EventFor(r)
	if eventDigest(ev.Body, ev.Properties) != dg {
		return false
	}
	dd.mu.Lock()
	delete(dp.present, r.Offset)
	dp.found++
	dd.mu.Unlock()
	return true
}

// eventDigest hashes an event's body and properties, so that an event read
// back is matched to a record by content as well as by provenance.
func eventDigest(body []byte, props map[string]any) uint64 {
	h := fnv.New64a()
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var buf []byte
	buf = strconv.AppendInt(buf, int64(len(body)), 10)
	buf = append(buf, 0)
	buf = append(buf, body...)
	for _, k := range keys {
		buf = append(buf, 0)
		buf = append(buf, k...)
		buf = append(buf, 0)
		switch v := props[k].(type) {
		case string:
			buf = append(buf, 's')
			buf = append(buf, v...)
		case []byte:
			buf = append(buf, 'b')
			buf = strconv.AppendInt(buf, int64(len(v)), 10)
			buf = append(buf, ':')
			buf = append(buf, v...)
		case int64:
			buf = append(buf, 'i')
			buf = strconv.AppendInt(buf, v, 10)
		case bool:
			buf = append(buf, 'o')
			buf = strconv.AppendBool(buf, v)
		case time.Time:
			buf = append(buf, 't')
			buf = strconv.AppendInt(buf, v.UnixMilli(), 10)
		default:
			buf = append(buf, 'x')
			buf = fmt.Appendf(buf, "%T:%v", v, v)
		}
	}
	_, _ = h.Write(buf)
	return h.Sum64()
}

// listenCheckTTL is how long the result of a Listen check is reused.
const listenCheckTTL = 5 * time.Minute

// listenCheck is the cached outcome of a Listen check of one hub.
type listenCheck struct {
	err error
	at  time.Time
}

// checkListen returns an error when the credentials lack the Listen right
// on hub; the answer is cached for listenCheckTTL. Errors other than a
// refusal count as a pass (the reading itself reports them).
func (m *Mirror) checkListen(ctx context.Context, reader HubReader, hub, partitionID string, at int64) error {
	m.mu.Lock()
	c, ok := m.listen[hub]
	m.mu.Unlock()
	if ok && time.Since(c.at) < listenCheckTTL {
		return c.err
	}
	err := reader.CheckListen(ctx, hub, partitionID, at)
	if err != nil && !errors.Is(err, ErrUnauthorized) {
		return nil
	}
	m.mu.Lock()
	m.listen[hub] = listenCheck{err: err, at: time.Now()}
	m.mu.Unlock()
	return err
}

// listenProblem is the one-line problem of a missing Listen right.
func listenProblem(hub string) string {
	return fmt.Sprintf("MIRROR_DEDUPLICATE is on but the credentials lack the Listen right on event hub %q (grant the role Azure Event Hubs Data Receiver, or use a SAS policy with Listen): after an unclean end records are sent again (at-least-once)", hub)
}

// zombie reports, with deduplication on, whether the drain's claim was
// lost: its senders then publish nothing more, so that the partitions' new
// owner, which reconciles when it starts, is not followed by late events.
// A batch already on the wire cannot be recalled.
func (d *drain) zombie() bool {
	if d.dd == nil {
		return false
	}
	select {
	case <-d.claim.Lost():
		return true
	default:
		return false
	}
}

// dedupReport adds to the report's deduplication line what the drain
// learned while committing: floors left out for lack of room.
func (d *drain) dedupReport(rep *Report) {
	if d.dd == nil || !d.dd.warned.Load() {
		return
	}
	msg := "too many event hub partitions to store their sequence numbers with a commit (Kafka keeps 4096 bytes of metadata): after an unclean end these partitions are at-least-once"
	if rep.Deduplication == "" {
		rep.Deduplication = msg
	} else if !strings.Contains(rep.Deduplication, msg) {
		rep.Deduplication += "; " + msg
	}
}
