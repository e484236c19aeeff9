// Package eventhubs adapts the Azure Event Hubs SDK (azeventhubs v2) to the
// mirror: a [Sink] publishes batches through one ProducerClient per event
// hub, authenticated by connection string or by Microsoft Entra ID.
package eventhubs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehmirror/ehmirror/mirror"
)

// Options configure a [Sink]. Set either ConnectionString, or
// FullyQualifiedNamespace and Credential.
type Options struct {
	// ConnectionString is a namespace connection string (it must not carry
	// an EntityPath; the sink opens one producer per hub).
	ConnectionString string
	// FullyQualifiedNamespace is the namespace host, e.g.
	// "myns.servicebus.windows.net", used with Credential.
	FullyQualifiedNamespace string
	// Credential authenticates with Microsoft Entra ID (for example a
	// managed identity from azidentity).
	Credential azcore.TokenCredential
	// Retry configures the retries of reads: hub and partition properties
	// and new batches. The mirror retries on top of them until its drain
	// deadline, so the defaults here are short: 2 retries, 200 ms first
	// delay, 2 s maximum delay. Sends are never retried here (see Send).
	Retry azeventhubs.RetryOptions
	// HubInfoTTL is how long hub properties (partition ids) are cached.
	// Default 5 minutes.
	HubInfoTTL time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// ReaderConsumerGroup is the consumer group the sink reads back events
	// in, for deduplication (MIRROR_DEDUPLICATE). Default "$Default".
	ReaderConsumerGroup string
}

// Sink publishes to an Event Hubs namespace. It implements [mirror.Sink] and
// is safe for concurrent use. Producers are created once per hub and reused
// across drains; the SDK reconnects them when the service closes idle
// connections.
type Sink struct {
	opts Options

	mu        sync.Mutex
	producers map[string]*producer
	consumers map[string]*azeventhubs.ConsumerClient
	hubs      map[string]cachedHub
	// management paces the $management reads (pacing.go).
	management *window
}

type cachedHub struct {
	hub     mirror.Hub
	fetched time.Time
}

var _ mirror.Sink = (*Sink)(nil)

// NewSink checks opts and returns a sink. It does no network I/O.
func NewSink(opts Options) (*Sink, error) {
	switch {
	case opts.ConnectionString != "" && opts.FullyQualifiedNamespace != "":
		return nil, errors.New("eventhubs: set a connection string or a namespace with a credential, not both")
	case opts.ConnectionString == "" && opts.FullyQualifiedNamespace == "":
		return nil, errors.New("eventhubs: no connection string and no namespace")
	case opts.FullyQualifiedNamespace != "" && opts.Credential == nil:
		return nil, errors.New("eventhubs: a namespace needs a credential")
	}
	if opts.ConnectionString != "" {
		props, err := azeventhubs.ParseConnectionString(opts.ConnectionString)
		if err != nil {
			// The SDK's message may quote the string; never echo secrets.
			return nil, errors.New("eventhubs: connection string is malformed: want Endpoint=sb://HOST/;SharedAccessKeyName=NAME;SharedAccessKey=KEY")
		}
		if props.EntityPath != nil {
			return nil, fmt.Errorf("eventhubs: connection string names the event hub %q (EntityPath); use a namespace-level connection string", *props.EntityPath)
		}
	}
	if opts.Retry == (azeventhubs.RetryOptions{}) {
		opts.Retry = azeventhubs.RetryOptions{MaxRetries: 2, RetryDelay: 200 * time.Millisecond, MaxRetryDelay: 2 * time.Second}
	}
	if opts.HubInfoTTL <= 0 {
		opts.HubInfoTTL = 5 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Sink{opts: opts, producers: make(map[string]*producer), consumers: make(map[string]*azeventhubs.ConsumerClient), hubs: make(map[string]cachedHub), management: &window{n: managementPerSecond, period: time.Second}}, nil
}

// producer is one hub's producer client, closed once when retired.
type producer struct {
	*azeventhubs.ProducerClient
	retireOnce sync.Once
}

// producer returns the cached producer of hub, creating it on first use.
func (s *Sink) producer(hub string) (*producer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.producers[hub]; ok {
		return p, nil
	}
	// One attempt per call: a send the SDK retried after an error whose
	// outcome it did not know could store a batch twice, out of the
	// caller's sight. Reads are retried by the sink (read).
	once := s.opts.Retry
	once.MaxRetries = -1
	opts := &azeventhubs.ProducerClientOptions{ApplicationID: "ehmirror", RetryOptions: once}
	var p *azeventhubs.ProducerClient
	var err error
	if s.opts.ConnectionString != "" {
		p, err = azeventhubs.NewProducerClientFromConnectionString(s.opts.ConnectionString, hub, opts)
	} else {
		p, err = azeventhubs.NewProducerClient(s.opts.FullyQualifiedNamespace, hub, s.opts.Credential, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("eventhubs: producer for %q: %w", hub, err)
	}
	s.producers[hub] = &producer{ProducerClient: p}
	return s.producers[hub], nil
}

// Hub returns the hub's partition ids, cached for HubInfoTTL.
func (s *Sink) Hub(ctx context.Context, name string) (mirror.Hub, error) {
	s.mu.Lock()
	c, ok := s.hubs[name]
	s.mu.Unlock()
	if ok && time.Since(c.fetched) < s.opts.HubInfoTTL {
		return c.hub, nil
	}
	return s.ProbeHub(ctx, name)
}

// ProbeHub reads the hub's properties from the service now, not from the
// cache (the readiness check: a namespace that went away must not look
// reachable for HubInfoTTL), and refreshes the cache.
func (s *Sink) ProbeHub(ctx context.Context, name string) (mirror.Hub, error) {
	var props azeventhubs.EventHubProperties
	err := s.read(ctx, name, true, func(p *producer) (err error) {
		props, err = p.GetEventHubProperties(ctx, nil)
		return err
	})
	if err != nil {
		return mirror.Hub{}, fmt.Errorf("eventhubs: reading properties of %q: %w", name, classify(err))
	}
	hub := mirror.Hub{Name: name, PartitionIDs: props.PartitionIDs}
	s.mu.Lock()
	s.hubs[name] = cachedHub{hub: hub, fetched: time.Now()}
	s.mu.Unlock()
	return hub, nil
}

// read calls op with hub's producer until it succeeds, fails for good (no
// such hub, no right), ctx ends, or the retries of Options.Retry are used
// up. Producers make one attempt per call (see Send), so the operations
// that may be repeated safely are retried here. With management set (op is
// a $management read), a connection still lost on the second attempt
// replaces the producer: the SDK keeps using a management link whose
// connection is gone, and every later read on it fails. Sends and new
// batches recover by themselves, and replacing the producer would fail the
// sends in flight on it.
func (s *Sink) read(ctx context.Context, hub string, management bool, op func(*producer) error) error {
	delay := s.opts.Retry.RetryDelay
	for attempt := int32(0); ; attempt++ {
		p, err := s.producer(hub)
		if err != nil {
			return err
		}
		if management {
			if err := s.management.wait(ctx); err != nil {
				return err
			}
		}
		err = op(p)
		if err == nil || ctx.Err() != nil {
			return err
		}
		if c := classify(err); errors.Is(c, mirror.ErrHubNotFound) || errors.Is(c, mirror.ErrUnauthorized) {
			return err
		}
		if management && attempt > 0 && connectionLost(err) {
			s.retire(hub, p)
		}
		if attempt >= s.opts.Retry.MaxRetries {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		delay = min(2*delay, s.opts.Retry.MaxRetryDelay)
	}
}

// connectionLost reports whether err says the client's connection to the
// service was lost.
func connectionLost(err error) bool {
	var ehErr *azeventhubs.Error
	return errors.As(err, &ehErr) && ehErr.Code == azeventhubs.ErrorCodeConnectionLost
}

// NewBatch starts a batch for one partition of hub.
func (s *Sink) NewBatch(ctx context.Context, hub, partitionID string) (mirror.Batch, error) {
	var b *azeventhubs.EventDataBatch
	err := s.read(ctx, hub, false, func(p *producer) (err error) {
		b, err = p.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: &partitionID})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("eventhubs: new batch for %q partition %s: %w", hub, partitionID, classify(err))
	}
	return &batch{hub: hub, partitionID: partitionID, b: b}, nil
}

// Send publishes a batch made by NewBatch with one attempt of the SDK: after
// an error the batch may or may not be stored, and the caller decides
// whether to send it again. One resend remains the SDK's own: when a send
// finds its link detached, the SDK recovers the link and sends once more at
// once (its quick recovery), which stores the batch twice if the detach
// came after the service stored it.
func (s *Sink) Send(ctx context.Context, mb mirror.Batch) error {
	b, ok := mb.(*batch)
	if !ok {
		return fmt.Errorf("eventhubs: batch of type %T was not made by this sink", mb)
	}
	p, err := s.producer(b.hub)
	if err != nil {
		return err
	}
	if err := p.SendEventDataBatch(ctx, b.b, nil); err != nil {
		if ctx.Err() != nil {
			// The caller gave up with the batch's outcome unknown: it may
			// still be on its way (queued in the client, or in the
			// service). Close the hub's producer before returning, so that
			// nothing sent through it can land after a later read of the
			// hub (deduplication reads it back to resolve the outcome).
			s.retire(b.hub, p)
		}
		return fmt.Errorf("eventhubs: sending %d events to %q partition %s: %w", b.b.NumEvents(), b.hub, b.partitionID, classify(err))
	}
	return nil
}

// retireTimeout bounds how long closing a retired producer may take.
const retireTimeout = 5 * time.Second

// retire drops p from the cache (the next use of hub opens a new producer)
// and closes it, waiting up to retireTimeout: once the service answered the
// close of its connection, every frame sent before was handled. Concurrent
// callers for the same producer wait for the one close.
func (s *Sink) retire(hub string, p *producer) {
	s.mu.Lock()
	if s.producers[hub] == p {
		delete(s.producers, hub)
	}
	s.mu.Unlock()
	p.retireOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), retireTimeout)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			s.opts.Logger.Warn("closing a retired event hubs producer", "hub", hub, "err", classify(err))
		}
	})
}

// Close closes every producer.
func (s *Sink) Close(ctx context.Context) error {
	s.mu.Lock()
	producers := s.producers
	s.producers = make(map[string]*producer)
	consumers := s.consumers
	s.consumers = make(map[string]*azeventhubs.ConsumerClient)
	s.mu.Unlock()
	var errs []error
	for hub, c := range consumers {
		if err := c.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("eventhubs: closing consumer for %q: %w", hub, err))
		}
	}
	for hub, p := range producers {
		if err := p.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("eventhubs: closing producer for %q: %w", hub, err))
		}
	}
	return errors.Join(errs...)
}

// batch adapts an EventDataBatch to mirror.Batch.
type batch struct {
	hub, partitionID string
	b                *azeventhubs.EventDataBatch
	// msg, props and body are reused by every Add: the SDK encodes the
	// message when it is added and keeps none of them.
	msg   azeventhubs.AMQPAnnotatedMessage
	props azeventhubs.AMQPAnnotatedMessageProperties
	body  [1][]byte
}

// Add appends an event; see mirror.Batch. The event's properties map is
// handed to the SDK as it is (AddEventData would copy it for every event;
// go-amqp encodes a pointer's value as the value), except for a batch's
// first event: the SDK keeps that one's map as the envelope of the batch
// (encoded again when the batch is sent), while the engine reuses its map
// and the values it points at for the next event (mirror.PropertyValues).
func (b *batch) Add(e *mirror.Event) error {
	props := e.Properties
	if b.b.NumEvents() == 0 {
		props = mirror.PropertyValues(props)
	}
	b.body[0] = e.Body
	b.props.MessageID = e.MessageID
	b.msg = azeventhubs.AMQPAnnotatedMessage{
		Body:                  azeventhubs.AMQPAnnotatedMessageBody{Data: b.body[:]},
		ApplicationProperties: props,
		Properties:            &b.props,
	}
	err := b.b.AddAMQPAnnotatedMessage(&b.msg, nil)
	b.body[0], b.msg.ApplicationProperties = nil, nil
	switch {
	case err == nil:
		return nil
	case errors.Is(err, azeventhubs.ErrEventDataTooLarge) && b.b.NumEvents() == 0:
		return fmt.Errorf("%w: the event alone exceeds the hub's maximum publication size", mirror.ErrEventTooLarge)
	case errors.Is(err, azeventhubs.ErrEventDataTooLarge):
		return mirror.ErrBatchFull
	}
	return fmt.Errorf("eventhubs: adding event %s: %w", e.MessageID, err)
}

// Len is the number of events in the batch.
func (b *batch) Len() int { return int(b.b.NumEvents()) }

// Bytes is the encoded size of the batch.
func (b *batch) Bytes() int { return int(b.b.NumBytes()) }
