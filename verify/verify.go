package verify

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"golang.org/x/sync/errgroup"

	"github.com/ehmirror/ehmirror/mirror"
)

// receiveBatch is the most events asked for in one receive call.
const receiveBatch = 1000

// Run verifies: it takes the Kafka snapshot (end offsets and committed
// offsets first, then every record), then reads every event of the hubs the
// selected topics route to, up to the last sequence number each partition
// reported, and compares. An error means the verification could not be done;
// a report whose OK is false means it found problems.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	started := time.Now()
	snap, err := readKafka(ctx, cfg, mirror.NewRouter(cfg.Routes))
	if err != nil {
		return nil, err
	}
	c := newChecker(snap, cfg.Partitioning)
	if err := readEventHubs(ctx, cfg, c); err != nil {
		return nil, err
	}
	rep := c.report()
	rep.Started, rep.Duration = started, time.Since(started)
	rep.Group, rep.FailOnDuplicates, rep.FailOnPending = cfg.Group, cfg.FailOnDuplicates, cfg.FailOnPending
	return rep, nil
}

// hubPartition is one Event Hubs partition to read.
type hubPartition struct {
	client *azeventhubs.ConsumerClient
	hub    string
	id     string
	props  azeventhubs.PartitionProperties
}

// readEventHubs reads every partition of every hub in c.
func readEventHubs(ctx context.Context, cfg Config, c *checker) error {
	var parts []hubPartition
	var clients []*azeventhubs.ConsumerClient
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		for _, cc := range clients {
			_ = cc.Close(closeCtx)
		}
	}()
	redact := redactor(cfg.EventHubs.ConnectionString)
	var total int64
	for _, hub := range c.hubNames() {
		cc, err := newConsumer(cfg.EventHubs, hub)
		if err != nil {
			return err
		}
		clients = append(clients, cc)
		props, err := cc.GetEventHubProperties(ctx, nil)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			c.hubError(hub, redact("cannot read the hub: "+oneLine(err)))
			continue
		}
		c.hubPartitions(hub, len(props.PartitionIDs))
		for _, id := range props.PartitionIDs {
			pp, err := cc.GetPartitionProperties(ctx, id, nil)
			if err != nil {
				return fmt.Errorf("event hubs: %s partition %s: properties: %s", hub, id, redact(oneLine(err)))
			}
			if pp.IsEmpty {
				continue
			}
			total += pp.LastEnqueuedSequenceNumber - pp.BeginningSequenceNumber + 1
			parts = append(parts, hubPartition{client: cc, hub: hub, id: id, props: pp})
		}
	}

	var done atomic.Int64
	var progressMu sync.Mutex
	report := func(n int) {
		d := done.Add(int64(n))
		if cfg.Progress != nil {
			progressMu.Lock()
			cfg.Progress(Progress{Phase: "eventhubs", Done: d, Total: total})
			progressMu.Unlock()
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.Parallelism)
	for i, hp := range parts {
		idx, err := strconv.Atoi(hp.id)
		if err != nil {
			idx = i
		}
		pc := c.newPartition(hp.hub, int32(idx))
		g.Go(func() error {
			err := readHubPartition(gctx, cfg, c, pc, hp, report)
			if err != nil {
				return errors.New(redact(err.Error()))
			}
			return nil
		})
	}
	return g.Wait()
}

// readHubPartition reads a partition from its beginning to the last sequence
// number it reported.
func readHubPartition(ctx context.Context, cfg Config, c *checker, pc *partitionCheck, hp hubPartition, report func(int)) error {
	earliest := true
	client, err := hp.client.NewPartitionClient(hp.id, &azeventhubs.PartitionClientOptions{
		StartPosition: azeventhubs.StartPosition{Earliest: &earliest},
	})
	if err != nil {
		return fmt.Errorf("event hubs: %s partition %s: %w", hp.hub, hp.id, err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = client.Close(closeCtx)
	}()
	last := hp.props.LastEnqueuedSequenceNumber
	cur := hp.props.BeginningSequenceNumber - 1
	for cur < last {
		rctx, cancel := context.WithTimeout(ctx, cfg.IdleTimeout)
		events, err := client.ReceiveEvents(rctx, int(min(receiveBatch, last-cur)), nil)
		cancel()
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				c.incomplete(hp.hub, fmt.Sprintf("partition %s: nothing received for %s after sequence number %d of %d", hp.id, cfg.IdleTimeout, cur, last))
				return nil
			}
			return fmt.Errorf("event hubs: %s partition %s: receiving after sequence number %d: %s", hp.hub, hp.id, cur, oneLine(err))
		}
		for _, ev := range events {
			c.observe(pc, ev.SequenceNumber, ev.Body, ev.Properties)
			cur = ev.SequenceNumber
		}
		report(len(events))
	}
	return nil
}

// newConsumer opens a consumer client of hub.
func newConsumer(e EventHubs, hub string) (*azeventhubs.ConsumerClient, error) {
	opts := &azeventhubs.ConsumerClientOptions{
		ApplicationID: "ehmirror-verify",
		RetryOptions:  azeventhubs.RetryOptions{MaxRetries: 3, RetryDelay: 200 * time.Millisecond, MaxRetryDelay: 2 * time.Second},
	}
	if e.ConnectionString != "" {
		cc, err := azeventhubs.NewConsumerClientFromConnectionString(e.ConnectionString, hub, e.ConsumerGroup, opts)
		if err != nil {
			// The SDK's message may quote the string; never echo it.
			return nil, errors.New("event hubs: the connection string is malformed: want Endpoint=sb://HOST/;SharedAccessKeyName=NAME;SharedAccessKey=KEY")
		}
		return cc, nil
	}
	cc, err := azeventhubs.NewConsumerClient(e.Namespace, hub, e.ConsumerGroup, e.Credential, opts)
	if err != nil {
		return nil, fmt.Errorf("event hubs: consumer of %s: %w", hub, err)
	}
	return cc, nil
}

// redactor returns a function that removes the connection string and its
// key from a message.
func redactor(connectionString string) func(string) string {
	var secrets []string
	if connectionString != "" {
		secrets = append(secrets, connectionString)
		for _, part := range strings.Split(connectionString, ";") {
			if k, v, ok := strings.Cut(part, "="); ok && strings.EqualFold(strings.TrimSpace(k), "SharedAccessKey") && v != "" {
				secrets = append(secrets, v)
			}
		}
	}
	return func(s string) string {
		for _, sec := range secrets {
			s = strings.ReplaceAll(s, sec, "(redacted)")
		}
		return s
	}
}

// oneLine flattens an error message.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
