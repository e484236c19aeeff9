package emulator

import (
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/ehmirror/ehmirror/emulator/amqp"
)

// Error conditions useful with [Faults].
const (
	// ConditionServerBusy makes the SDK back off and retry on the same link.
	ConditionServerBusy = "com.microsoft:server-busy"
	// ConditionTimeout is retried like server-busy.
	ConditionTimeout = "com.microsoft:timeout"
	// ConditionDetachForced makes the SDK re-create the link and retry.
	ConditionDetachForced = "amqp:link:detach-forced"
	// ConditionInternalError makes the SDK re-create the connection and retry.
	ConditionInternalError = "amqp:internal-error"
	// ConditionResourceLimitExceeded is fatal for the SDK ("entity is full").
	ConditionResourceLimitExceeded = "amqp:resource-limit-exceeded"
	// ConditionMessageSizeExceeded is what an oversized delivery gets.
	ConditionMessageSizeExceeded = "amqp:link:message-size-exceeded"
)

// Faults injects failures into a running server. Every method is safe for
// concurrent use and takes effect immediately; [Faults.Reset] clears them.
type Faults struct {
	srv *Server

	mu             sync.Mutex
	rejectNext     int
	rejectNextCond string
	rejectFraction float64
	rejectFracCond string
	rng            *rand.Rand
	dropNext       int
	delay          time.Duration
	ingestWait     time.Duration
	managementWait time.Duration
	// readsFailUntil: $management reads of a hub's partition
	// properties fail until then (FailPartitionReads).
	readsFailUntil map[string]time.Time
}

func newFaults(srv *Server) *Faults {
	return &Faults{srv: srv, rng: rand.New(rand.NewPCG(1, 2))}
}

// Faults returns the server's fault injector.
func (srv *Server) Faults() *Faults { return srv.faults }

// RejectSends makes the next n producer deliveries fail with a rejected
// disposition carrying condition (e.g. [ConditionServerBusy]); nothing of
// them is stored. n <= 0 cancels.
func (f *Faults) RejectSends(n int, condition string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rejectNext, f.rejectNextCond = max(n, 0), condition
}

// RejectFraction rejects each producer delivery with probability fraction
// (0 disables) with condition. The random sequence is deterministic.
func (f *Faults) RejectFraction(fraction float64, condition string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rejectFraction, f.rejectFracCond = fraction, condition
}

// DropNextTransfers makes the emulator close the TCP connection abruptly
// (no AMQP close) when it receives the first transfer frame of each of the
// next n producer deliveries: a batch that spans several frames is cut in
// the middle, and none of its events is stored.
func (f *Faults) DropNextTransfers(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropNext = max(n, 0)
}

// DelayDispositions delays the disposition of every producer delivery by d
// (0 disables). Events are stored before the delay.
func (f *Faults) DelayDispositions(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delay = d
}

// DelayIngest makes the emulator wait d before it stores each producer
// delivery (0 disables), holding up the frames that follow on the same
// connection, in order, as a busy service does: a send that gives up
// meanwhile has an unknown outcome, and its events are stored later.
func (f *Faults) DelayIngest(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ingestWait = d
}

// DelayManagement makes the emulator wait d before it answers each
// $management request (hub and partition properties; 0 disables), holding
// up the frames that follow on the same connection: the round trip of a
// service in another region, where such a read takes tens of milliseconds.
func (f *Faults) DelayManagement(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.managementWait = d
}

// FailPartitionReads makes every $management read of the partition
// properties of hub answer 503 (server busy) for the next d: a hub that
// does not answer for a while (0 cancels).
func (f *Faults) FailPartitionReads(hub string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readsFailUntil == nil {
		f.readsFailUntil = make(map[string]time.Time)
	}
	f.readsFailUntil[strings.ToLower(hub)] = time.Now().Add(d)
}

// Reset clears every pending fault.
func (f *Faults) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rejectNext, f.rejectFraction, f.dropNext, f.delay, f.ingestWait, f.managementWait = 0, 0, 0, 0, 0, 0
	f.readsFailUntil = nil
}

// partitionReadFails reports whether a read of hub's partition properties
// must fail now (FailPartitionReads).
func (f *Faults) partitionReadFails(hub string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return time.Now().Before(f.readsFailUntil[strings.ToLower(hub)])
}

// DropConnections closes every open connection abruptly (TCP close, no AMQP
// close) and returns how many it closed.
func (f *Faults) DropConnections() int {
	conns := f.srv.allConns()
	for _, c := range conns {
		c.abort()
	}
	return len(conns)
}

// DetachProducers detaches every attached producer link with the error
// condition and description and returns how many it detached.
func (f *Faults) DetachProducers(condition, description string) int {
	return f.detach(kindProducer, condition, description)
}

// DetachConsumers detaches every attached consumer link with the error
// condition and description and returns how many it detached.
func (f *Faults) DetachConsumers(condition, description string) int {
	return f.detach(kindConsumer, condition, description)
}

func (f *Faults) detach(k linkKind, condition, description string) int {
	n := 0
	for _, l := range f.srv.linksOfKind(k) {
		if l.detach(&amqp.Error{Condition: amqp.Symbol(condition), Description: description}) {
			n++
		}
	}
	return n
}

// takeReject reports whether the current producer delivery must be
// rejected, and with which condition.
func (f *Faults) takeReject() (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rejectNext > 0 {
		f.rejectNext--
		return f.rejectNextCond, true
	}
	if f.rejectFraction > 0 && f.rng.Float64() < f.rejectFraction {
		return f.rejectFracCond, true
	}
	return "", false
}

func (f *Faults) takeDrop() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dropNext > 0 {
		f.dropNext--
		return true
	}
	return false
}

func (f *Faults) managementDelay() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.managementWait
}

func (f *Faults) ingestDelay() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ingestWait
}

func (f *Faults) dispositionDelay() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delay
}
