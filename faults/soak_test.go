package faults

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/mirror"
)

// soakDurationEnv sets how long the soak injects faults (a Go duration;
// default 5m).
const soakDurationEnv = "EHMIRROR_SOAK_DURATION"

// soakFaultsEnv narrows the soak's faults to a comma-separated list of
// their names (e.g. "broker restart,retention purge"), to chase a failure.
const soakFaultsEnv = "EHMIRROR_SOAK_FAULTS"

// soakDuration returns the soak's fault phase length.
func soakDuration(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv(soakDurationEnv)
	if v == "" {
		return 5 * time.Minute
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration such as 10m", soakDurationEnv, v)
	}
	return d
}

// soakFault is one fault the soak can inject; run injects it and returns
// when it is over (or has been set up to clear itself).
type soakFault struct {
	name string
	run  func(ctx context.Context) error
}

// gapRE reads a partition line of a drain report that counted a gap.
var gapRE = regexp.MustCompile(`^(\S+)/(\d+) -> .*gap of (\d+) records lost to retention`)

// TestSoakMixedFaults runs, for EHMIRROR_SOAK_DURATION (default 5 minutes),
// everything at once: records produced continuously; in-process drains back
// to back and, at the same time, timer invocations of the real handler
// under the local Functions host (two members of one group); and every one
// to three seconds a fault picked at random: Event Hubs server-busy (burst
// and sustained), connections cut mid-batch and dropped, producer links
// detached, acknowledgements delayed past the deadline, Kafka group
// coordinator errors, a broker restart, a SIGKILL of the handler, and a
// retention purge (both drainers run MIRROR_GAP_POLICY=resume-earliest).
// Then it verifies as every scenario does: zero records lost (records
// removed by retention must be covered by the gaps the reports counted),
// duplicates within the bound, per-key order, committed offsets never
// decreasing.
func TestSoakMixedFaults(t *testing.T) {
	needSoak(t)
	e := newEnv(t, envConfig{Restartable: true})
	f := newFigures(t, "soak", "all faults mixed at random, in-process drains and the handler at once")
	ctx := context.Background()
	rng := newRand(t)
	duration := soakDuration(t)

	m := e.newMirror(mirror.Options{GapPolicy: mirror.GapResumeEarliest})
	h := e.startHandler("soak", map[string]string{
		config.MirrorGapPolicy:     string(mirror.GapResumeEarliest),
		config.MirrorMaxDuration:   "10s",
		config.MirrorInFlightBytes: "1MiB",
	})
	p := e.startProducer(producerConfig{})
	loop := e.startDrains(m, "drain", mirror.Limits{MaxDuration: 2 * time.Second})

	var rngMu sync.Mutex
	intn := func(n int) int {
		rngMu.Lock()
		defer rngMu.Unlock()
		return rng.IntN(n)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := h.timer(ctx, true); err != nil {
				t.Errorf("timer: %v", err)
				return
			}
			sleepCtx(ctx, time.Duration(intn(300))*time.Millisecond)
		}
	})

	seen := newRecordSet()
	faults := soakFaults(e, h, seen, intn)
	if only := os.Getenv(soakFaultsEnv); only != "" {
		faults = slices.DeleteFunc(faults, func(f soakFault) bool { return !slices.Contains(strings.Split(only, ","), f.name) })
		if len(faults) == 0 {
			t.Fatalf("%s=%q names no fault", soakFaultsEnv, only)
		}
	}
	counts := map[string]int{}
	end := time.Now().Add(duration)
	for time.Now().Before(end) {
		sleepCtx(ctx, time.Duration(1000+intn(2000))*time.Millisecond)
		ft := faults[intn(len(faults))]
		counts[ft.name]++
		if err := ft.run(ctx); err != nil {
			t.Errorf("fault %s: %v", ft.name, err)
		}
	}
	close(stop)
	wg.Wait()
	loop.stop()
	p.stop()
	e.emu.Faults().Reset()
	e.withKafka(func(c *kfake.Cluster) { c.DropControl() })
	e.settle(ctx, m, mirror.Limits{})

	final, err := e.readKafka(ctx, e.cfg.Topics, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen.add(final)
	starts := e.logStarts()
	v := e.verify(expectation{Records: seen.order, Explain: func(r kafkaRecord) string {
		if r.Offset < starts[r.tp()] {
			return "removed by retention before it was mirrored (gap reported)"
		}
		return ""
	}})
	e.assert(f, v)

	// Records missing for retention must be covered by counted gaps (the
	// in-process reports and the handler's).
	reported := map[mirror.TopicPartition]int64{}
	for _, rep := range e.drainReports() {
		for _, pr := range rep.Partitions {
			reported[mirror.TopicPartition{Topic: pr.Topic, Partition: pr.Partition}] += pr.Gap
		}
	}
	h.mu.Lock()
	for _, res := range h.results {
		for _, l := range reportLines(res) {
			if g := gapRE.FindStringSubmatch(l); g != nil {
				part, _ := strconv.Atoi(g[2])
				n, _ := strconv.ParseInt(g[3], 10, 64)
				reported[mirror.TopicPartition{Topic: g[1], Partition: int32(part)}] += n
			}
		}
	}
	h.mu.Unlock()
	missing := map[mirror.TopicPartition]int64{}
	inHubs := e.mirroredIDs()
	for _, r := range seen.order {
		if !inHubs[idOf(r.Topic, r.Partition, r.Offset, r.Value)] {
			missing[r.tp()]++
		}
	}
	for tp, n := range missing {
		if reported[tp] < n {
			t.Errorf("%s: %d records missing for retention, the reports counted gaps of %d", tp, n, reported[tp])
		}
	}

	names := make([]string, 0, len(counts))
	for name, n := range counts {
		names = append(names, fmt.Sprintf("%s ×%d", name, n))
	}
	sort.Strings(names)
	f.note("%s of faults: %s; at most %d copies of one record", duration, strings.Join(names, ", "), v.MaxCopies)
}

// soakFaults returns the faults the soak picks from. intn is the soak's
// (locked) random source.
func soakFaults(e *env, h *handler, seen *recordSet, intn func(int) int) []soakFault {
	g := e.group
	coordinator := []kfake.Fault{
		{Keys: []kmsg.Key{kmsg.OffsetCommit}, Group: g, Err: kerr.CoordinatorNotAvailable, Count: 3},
		{Keys: []kmsg.Key{kmsg.Heartbeat}, Group: g, Err: kerr.NotCoordinator, Count: 2},
		{Keys: []kmsg.Key{kmsg.OffsetCommit}, Group: g, Err: kerr.RequestTimedOut, Count: 2},
		{Keys: []kmsg.Key{kmsg.JoinGroup}, Group: g, Err: kerr.CoordinatorLoadInProgress, Count: 2},
		{Keys: []kmsg.Key{kmsg.SyncGroup}, Group: g, Err: kerr.RebalanceInProgress, Count: 1},
		{Keys: []kmsg.Key{kmsg.OffsetFetch}, Group: g, Err: kerr.CoordinatorLoadInProgress, Count: 2},
	}
	faults := e.emu.Faults()
	return []soakFault{
		{"server-busy burst", func(context.Context) error {
			faults.RejectSends(20, emulator.ConditionServerBusy)
			e.inject("server-busy burst")
			return nil
		}},
		{"server-busy 30% for 2 s", func(ctx context.Context) error {
			faults.RejectFraction(0.3, emulator.ConditionServerBusy)
			for range 8 {
				e.inject("server-busy 30%")
				sleepCtx(ctx, 250*time.Millisecond)
			}
			faults.RejectFraction(0, "")
			return nil
		}},
		{"connection cut mid-batch", func(context.Context) error {
			faults.DropNextTransfers(1)
			e.inject("connection cut mid-batch")
			return nil
		}},
		{"connections dropped", func(context.Context) error {
			faults.DropConnections()
			e.inject("connections dropped")
			return nil
		}},
		{"producer links detached", func(context.Context) error {
			faults.DetachProducers(emulator.ConditionDetachForced, "soak")
			e.inject("producer links detached")
			return nil
		}},
		{"acks delayed 1.5 s", func(ctx context.Context) error {
			faults.DelayDispositions(1500 * time.Millisecond)
			for range 6 {
				e.inject("acks delayed")
				sleepCtx(ctx, 250*time.Millisecond)
			}
			faults.DelayDispositions(0)
			return nil
		}},
		{"coordinator error", func(context.Context) error {
			ft := coordinator[intn(len(coordinator))]
			e.withKafka(func(c *kfake.Cluster) { c.Fault(ft) })
			e.inject(fmt.Sprintf("coordinator %v on %v", ft.Err, ft.Keys))
			return nil
		}},
		{"broker restart", func(context.Context) error {
			e.inject("kafka restart")
			err := e.restartKafka(time.Second)
			e.inject("kafka restarted")
			return err
		}},
		{"handler SIGKILL", func(ctx context.Context) error {
			e.inject("handler SIGKILL")
			return h.host.Restart(ctx)
		}},
		{"retention purge", func(ctx context.Context) error {
			snap, ok := e.offsets()
			if !ok {
				return nil
			}
			recs, err := e.readKafka(ctx, e.cfg.Topics, 0)
			if err != nil {
				return err
			}
			seen.add(recs)
			tp := mirror.TopicPartition{Topic: e.cfg.Topics[intn(len(e.cfg.Topics))], Partition: int32(intn(int(e.cfg.Partitions)))}
			o := snap[tp]
			if o.end <= o.start {
				return nil
			}
			to := o.start + 1 + int64(intn(int(o.end-o.start)))
			e.inject("retention purge")
			return e.purge(tp, to)
		}},
	}
}
