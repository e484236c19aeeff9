package mirror

import (
	"fmt"
	"log/slog"
	"os"
	"time"
)

// StartOffset says where a partition starts when its group has committed nothing.
type StartOffset string

// Start offsets.
const (
	StartEarliest StartOffset = "earliest"
	StartLatest   StartOffset = "latest"
)

// GapPolicy says what a drain does when records it never mirrored were
// removed by Kafka retention (the committed offset is below the log start),
// or when the committed offset lies beyond the log end (the topic was deleted
// and recreated, or truncated).
type GapPolicy string

// Gap policies.
const (
	// GapFail reports the gap and leaves the partition where it is, so an
	// operator decides. The default.
	GapFail GapPolicy = "fail"
	// GapResumeEarliest reports the gap, counts the records lost, and goes on
	// from the earliest record still stored.
	GapResumeEarliest GapPolicy = "resume-earliest"
)

// OversizePolicy says what a drain does with a record whose event is larger
// than the hub's maximum message size.
type OversizePolicy string

// Oversize policies.
const (
	// OversizeFail stops the record's partition before it; nothing is
	// committed past it and the report names it. The default.
	OversizeFail OversizePolicy = "fail"
	// OversizeSkip leaves the record out, counts it in the report and logs
	// its coordinates.
	OversizeSkip OversizePolicy = "skip"
)

// Options configure a [Mirror]. The zero value of each field selects the
// documented default.
type Options struct {
	// Topics selects the topics to mirror. Default: every non-internal topic.
	Topics TopicFilter
	// Routes rename topics into hubs; default: the hub named like the topic.
	Routes []Route
	// Partitioning defaults to PartitionByHash.
	Partitioning Partitioning
	// StartOffset defaults to StartEarliest.
	StartOffset StartOffset
	// GapPolicy defaults to GapFail.
	GapPolicy GapPolicy
	// OversizePolicy defaults to OversizeFail.
	OversizePolicy OversizePolicy
	// FetchBytes bounds one Kafka fetch. Default 1 MiB.
	FetchBytes int
	// InFlightBytes bounds the record bytes read but not yet acknowledged by
	// Event Hubs, and with it the drain's memory. Default 64 MiB.
	InFlightBytes int64
	// CommitInterval is how often a drain commits acknowledged offsets while
	// it runs (it always commits at the end). Default 1 s.
	CommitInterval time.Duration
	// RetryBackoff is the first pause before a transient error is retried;
	// it doubles up to MaxRetryBackoff. Defaults 100 ms and 5 s.
	RetryBackoff, MaxRetryBackoff time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Deduplicate makes a drain that follows an unclean end read back what
	// the previous drain published and skip those records (the sink must
	// implement [HubReader]; reading needs the Listen right). Default off.
	Deduplicate bool
	// Control enables offset resets and pauses; nil: neither is available
	// and no topic is ever paused.
	Control Control
	// PauseRefresh is how often a process re-writes the pause records it
	// sees, so that Kafka's offset retention never ends a pause. Default
	// 1 h.
	PauseRefresh time.Duration
	// CatchUpMaxDuration bounds a catch-up whose request gives no bound of
	// its own, such as the one a resume starts (MIRROR_CATCHUP_MAX_DURATION).
	// Default 10 min.
	CatchUpMaxDuration time.Duration
	// Instance names this process in the live problems its drains publish
	// for the other instances (peers.go). Default: host name and process
	// id.
	Instance string
}

func (o Options) withDefaults() (Options, error) {
	var err error
	if o.Partitioning, err = ParsePartitioning(string(o.Partitioning)); err != nil {
		return o, err
	}
	switch o.StartOffset {
	case "":
		o.StartOffset = StartEarliest
	case StartEarliest, StartLatest:
	default:
		return o, fmt.Errorf("start offset %q: want earliest or latest", o.StartOffset)
	}
	switch o.GapPolicy {
	case "":
		o.GapPolicy = GapFail
	case GapFail, GapResumeEarliest:
	default:
		return o, fmt.Errorf("gap policy %q: want fail or resume-earliest", o.GapPolicy)
	}
	switch o.OversizePolicy {
	case "":
		o.OversizePolicy = OversizeFail
	case OversizeFail, OversizeSkip:
	default:
		return o, fmt.Errorf("oversize policy %q: want fail or skip", o.OversizePolicy)
	}
	if o.FetchBytes <= 0 {
		o.FetchBytes = 1 << 20
	}
	if o.InFlightBytes <= 0 {
		o.InFlightBytes = 64 << 20
	}
	if o.CommitInterval <= 0 {
		o.CommitInterval = time.Second
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = 100 * time.Millisecond
	}
	if o.MaxRetryBackoff <= 0 {
		o.MaxRetryBackoff = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.PauseRefresh <= 0 {
		o.PauseRefresh = time.Hour
	}
	if o.CatchUpMaxDuration <= 0 {
		o.CatchUpMaxDuration = 10 * time.Minute
	}
	if o.Instance == "" {
		host, _ := os.Hostname()
		o.Instance = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	return o, nil
}

// Limits bound one drain. A zero field means no bound, except MaxDuration,
// which defaults to one minute.
type Limits struct {
	MaxRecords  int64
	MaxBytes    int64
	MaxDuration time.Duration
	// Topics, when set, narrows the mirrored topics for this drain.
	Topics *TopicFilter
	// FollowUntil, when set, makes the drain follow its partitions once
	// caught up (long-poll fetches, batches sent when full or after
	// FollowLinger) until this time or MaxDuration, then commit and
	// return. Zero: return as soon as caught up.
	FollowUntil time.Time

	// window, when set, is the follow window of a drain handed over from
	// invocation to invocation (Service.DrainFollowing); it replaces
	// FollowUntil and MaxDuration, which then bound each invocation.
	window *followWindow
	// started, when set, is called with the drain once it runs.
	started func(*drain)
}
