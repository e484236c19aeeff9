package mirror

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// maxCommitMetadata is Kafka's default offset.metadata.max.bytes: a commit
// whose metadata is longer is refused for that partition.
const maxCommitMetadata = 4096

// commitMetadataPrefix starts every metadata string the mirror stores with a
// commit; the format version follows it ("ehmirror/2").
const commitMetadataPrefix = "ehmirror/"

// commitMetadataVersion is the format written now. Version 1 (a fingerprint
// of the last record) is read as carrying no topic id.
const commitMetadataVersion = 2

// commitMeta is what the mirror stores beside each committed offset. The
// encoding is "ehmirror/<version>" followed by space-separated key=value
// fields; readers ignore keys they do not know, so later versions can add
// fields (values must not contain spaces). Only facts about the committed
// position belong here: anything else (pause state, settings) does not.
type commitMeta struct {
	// TopicID is the id of the topic the offset belongs to (KIP-516), ""
	// when the broker reports none.
	TopicID string
	// Hub is the event hub the partition is mirrored to ("hub="); written
	// with deduplication on.
	Hub string
	// Floors ("seq=ID:N,ID:N") map the hub partitions the drain may have
	// published the partition's records to since the committed offset to
	// a sequence number read before it published anything there: every
	// such event has a higher sequence number. Nil when unknown.
	Floors map[string]int64
	// Clean ("clean=1") says no event of a record at or above the
	// committed offset was published: the drain ended and committed
	// everything it sent.
	Clean bool
	// From ("from=N"), with Floors, is the lowest offset whose event a
	// read-back may count as published: an offset reset that moves a
	// position whose last drain ended unclean keeps that drain's floors
	// and sets From to the offset it replaced, so the records between the
	// new and the old position are sent again (what the reset said) and
	// those above it are not. 0 when absent.
	From int64
	// Writer ("w=") is a token of the drain that wrote the commit, drawn
	// at random by each drain: any other writer (another drain, an
	// offset reset, a tool) replaces it. A process trusts what it
	// remembers above a commit only while the commit still carries the
	// token it had when the process's drain ended (acked.go).
	Writer string
	// Acked ("ack=<Unix ms>") is when Event Hubs last acknowledged a
	// record of the partition before the commit: every instance reads it
	// with the committed offsets, so "last delivered" is the same on
	// every instance, whichever drained. Zero when unknown.
	Acked time.Time
}

// encode renders m; it fails when the result would exceed
// maxCommitMetadata or a value contains a space.
func (m commitMeta) encode() (string, error) {
	var b strings.Builder
	b.WriteString(commitMetadataPrefix)
	b.WriteString(strconv.Itoa(commitMetadataVersion))
	if m.TopicID != "" {
		if strings.ContainsAny(m.TopicID, " =") {
			return "", fmt.Errorf("commit metadata: topic id %q contains a space or '='", m.TopicID)
		}
		b.WriteString(" tid=")
		b.WriteString(m.TopicID)
	}
	if m.Hub != "" {
		if strings.ContainsAny(m.Hub, " =") {
			return "", fmt.Errorf("commit metadata: event hub %q contains a space or '='", m.Hub)
		}
		b.WriteString(" hub=")
		b.WriteString(m.Hub)
	}
	if m.Writer != "" {
		if strings.ContainsAny(m.Writer, " =") {
			return "", fmt.Errorf("commit metadata: writer token %q contains a space or '='", m.Writer)
		}
		b.WriteString(" w=")
		b.WriteString(m.Writer)
	}
	if m.Clean {
		b.WriteString(" clean=1")
	}
	if m.From > 0 && len(m.Floors) > 0 {
		b.WriteString(" from=")
		b.WriteString(strconv.FormatInt(m.From, 10))
	}
	if len(m.Floors) > 0 {
		ids := make([]string, 0, len(m.Floors))
		for id := range m.Floors {
			if id == "" || strings.ContainsAny(id, " =:,") {
				return "", fmt.Errorf("commit metadata: hub partition id %q contains a space, '=', ':' or ','", id)
			}
			ids = append(ids, id)
		}
		sort.Strings(ids)
		b.WriteString(" seq=")
		for i, id := range ids {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(id)
			b.WriteByte(':')
			b.WriteString(strconv.FormatInt(m.Floors[id], 10))
		}
	}
	if !m.Acked.IsZero() {
		b.WriteString(" ack=")
		b.WriteString(strconv.FormatInt(m.Acked.UnixMilli(), 10))
	}
	if b.Len() > maxCommitMetadata {
		return "", fmt.Errorf("commit metadata: %d bytes, Kafka keeps at most %d", b.Len(), maxCommitMetadata)
	}
	return b.String(), nil
}

// parseCommitMeta decodes encode's output. ok is false for metadata the
// mirror did not write; version 1 metadata decodes with no topic id.
func parseCommitMeta(s string) (m commitMeta, ok bool) {
	rest, found := strings.CutPrefix(s, commitMetadataPrefix)
	if !found {
		return m, false
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return m, false
	}
	v, err := strconv.Atoi(fields[0])
	if err != nil || v < 1 {
		return m, false
	}
	if v == 1 {
		return m, true
	}
	for _, f := range fields[1:] {
		k, val, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		switch k {
		case "tid":
			m.TopicID = val
		case "hub":
			m.Hub = val
		case "w":
			m.Writer = val
		case "clean":
			m.Clean = val == "1"
		case "seq":
			m.Floors = parseFloors(val)
		case "ack":
			if n, err := strconv.ParseInt(val, 10, 64); err == nil && n > 0 {
				m.Acked = time.UnixMilli(n)
			}
		case "from":
			if n, err := strconv.ParseInt(val, 10, 64); err == nil && n > 0 {
				m.From = n
			}
		}
	}
	return m, true
}

// parseFloors decodes "ID:N,ID:N"; anything malformed yields nil (unknown:
// no reconciliation, never a guess).
func parseFloors(s string) map[string]int64 {
	floors := make(map[string]int64)
	for _, part := range strings.Split(s, ",") {
		id, n, ok := strings.Cut(part, ":")
		if !ok || id == "" {
			return nil
		}
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil || v < -1 {
			return nil
		}
		floors[id] = v
	}
	return floors
}

// checkIdentity lists the topics and compares each partition's topic id with
// the one the drain started with. A partition whose topic vanished or
// changed id is failed and never committed again by this drain; the others
// are confirmed up to the read position they had before the listing began.
// It returns the listing's error, in which case nothing is confirmed.
func (d *drain) checkIdentity(ctx context.Context) error {
	marks := make([]int64, len(d.order))
	for i, ps := range d.order {
		marks[i] = ps.readMark()
	}
	topics, err := d.m.describeTopics(ctx, d.topicNames())
	if err != nil {
		d.identityMu.Lock()
		d.identityErr = err
		d.identityMu.Unlock()
		return fmt.Errorf("checking topic identity: %w", err)
	}
	d.identityMu.Lock()
	d.identityErr = nil
	d.identityMu.Unlock()
	now := make(map[string]Topic, len(topics))
	for _, t := range topics {
		now[t.Name] = t
	}
	for i, ps := range d.order {
		t, ok := now[ps.tp.Topic]
		want := d.ids[ps.tp.Topic]
		switch {
		case !ok:
			ps.recreated(fmt.Errorf("topic %q was deleted during the drain; nothing read past offset %d is committed", ps.tp.Topic, ps.lastVerified()))
		case want != "" && t.ID != want:
			ps.recreated(fmt.Errorf("topic %q was deleted and created again during the drain (topic id %s, now %s); nothing read past offset %d is committed, the next drain starts the new topic at its earliest offset",
				ps.tp.Topic, want, t.ID, ps.lastVerified()))
		default:
			ps.confirm(marks[i])
		}
	}
	return nil
}

// commit commits, in one request, every partition whose commit point
// advanced past its last commit. A failed commit does not stop later ones:
// their offsets are at least as high, and the claim keeps commits in order.
func (d *drain) commit(ctx context.Context) error {
	d.commitMu.Lock()
	defer d.commitMu.Unlock()
	offsets := make(map[TopicPartition]CommitOffset)
	clean := make(map[TopicPartition]bool)
	for _, ps := range d.order {
		if d.released[ps.tp] {
			continue // handed back: another drain or a reset may own it now
		}
		p := ps.commitPoint()
		if (p <= ps.lastCommitted() && !d.needsCleanMark(ps, p)) || ps.isRecreated() {
			continue
		}
		meta, isClean, err := d.commitMetaFor(ctx, ps, p)
		if err != nil {
			ps.fail(err)
			continue
		}
		offsets[ps.tp] = CommitOffset{Offset: p, Metadata: meta}
		clean[ps.tp] = isClean
	}
	if len(offsets) == 0 {
		return nil
	}
	if err := d.claim.CommitWithMetadata(ctx, offsets); err != nil {
		return fmt.Errorf("committing offsets of %d partitions: %w", len(offsets), err)
	}
	for tp, off := range offsets {
		d.states[tp].committedAt(off.Offset)
		d.committedMeta(d.states[tp], clean[tp])
		d.writer.wrote(tp)
	}
	d.handBackPausedLocked()
	return nil
}

// identityNote explains, for the report, why a partition's acknowledged
// records were not committed: the topic identity check could not run.
func (d *drain) identityNote(ps *partitionState) string {
	d.identityMu.Lock()
	err := d.identityErr
	d.identityMu.Unlock()
	if err == nil || !ps.unverified() || ps.isRecreated() {
		return ""
	}
	return fmt.Sprintf("not committed past offset %d: the topic's identity could not be checked (%v); the next drain reads these records again", ps.lastVerified(), err)
}

// describeTopics lists the named topics as they are now, through the
// source's TopicDescriber when it has one (every topic otherwise).
func (m *Mirror) describeTopics(ctx context.Context, names []string) ([]Topic, error) {
	if td, ok := m.source.(TopicDescriber); ok {
		return td.DescribeTopics(ctx, names)
	}
	return m.source.Topics(ctx)
}

// topicNames are the topics of the drain's partitions, each once.
func (d *drain) topicNames() []string {
	seen := make(map[string]bool)
	var names []string
	for _, ps := range d.order {
		if !seen[ps.tp.Topic] {
			seen[ps.tp.Topic] = true
			names = append(names, ps.tp.Topic)
		}
	}
	return names
}
