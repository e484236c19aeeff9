// Package randmsg is the seed's RandomMessage in Go: it writes numbered
// messages ("This is message number N") to topics chosen at random among
// prod.<base>1 .. prod.<base>5, optionally with keys, headers and padding,
// through kafka-go. The producer script and the demo share it.
package randmsg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/ehmirror/ehmirror/verify/kafkaconn"
)

// Defaults of [Options].
const (
	DefaultTopicBase = "test"
	DefaultTopics    = 5
	DefaultChunk     = 1000
)

// Options say what to produce. Zero fields take the defaults.
type Options struct {
	// TopicBase names the topics prod.<TopicBase>1 .. prod.<TopicBase>N.
	TopicBase string
	// Topics is N, the number of topics (default 5, as in the seed).
	Topics int
	// Count is the number of messages; they are numbered 0 .. Count-1.
	Count int
	// Keys, when positive, gives messages keys "key-<i mod Keys>".
	Keys int
	// KeyEvery gives a key only to every KeyEvery-th message (default 1:
	// every message), so a run can mix keyed and keyless messages.
	KeyEvery int
	// Headers adds headers: a text header, a repeated key and a binary one.
	Headers bool
	// HeaderEvery adds headers only to every HeaderEvery-th message
	// (default 1).
	HeaderEvery int
	// Size pads each value to at least Size bytes.
	Size int
	// Seed seeds the topic choice; 0 picks a random seed.
	Seed uint64
	// Chunk is the number of messages per synchronous write (default 1000).
	Chunk int
	// Out receives one line per written message, as the seed prints it:
	// "Topic: prod.test3. Message: This is message number 9704". Nil prints
	// nothing.
	Out io.Writer
	// EchoLimit, when positive, prints only the first EchoLimit lines.
	EchoLimit int
	// Progress, when set, is called after each chunk with the number of
	// messages written so far.
	Progress func(written int)
}

func (o Options) withDefaults() (Options, error) {
	if o.TopicBase == "" {
		o.TopicBase = DefaultTopicBase
	}
	if o.Topics <= 0 {
		o.Topics = DefaultTopics
	}
	if o.Count < 0 {
		return o, fmt.Errorf("count %d: want 0 or more", o.Count)
	}
	if o.Keys < 0 || o.Size < 0 {
		return o, errors.New("keys and size must not be negative")
	}
	if o.KeyEvery <= 0 {
		o.KeyEvery = 1
	}
	if o.HeaderEvery <= 0 {
		o.HeaderEvery = 1
	}
	if o.Chunk <= 0 {
		o.Chunk = DefaultChunk
	}
	if o.Seed == 0 {
		o.Seed = rand.Uint64()
	}
	return o, nil
}

// TopicNames returns prod.<base>1 .. prod.<base>n.
func TopicNames(base string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = "prod." + base + strconv.Itoa(i+1)
	}
	return names
}

// Text is the text of message number i.
func Text(i int) string { return "This is message number " + strconv.Itoa(i) }

// Generator makes the messages of one run, in order.
type Generator struct {
	opts   Options
	topics []string
	rng    *rand.Rand
	next   int
}

// NewGenerator returns a generator for opts.
func NewGenerator(opts Options) (*Generator, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Generator{
		opts:   opts,
		topics: TopicNames(opts.TopicBase, opts.Topics),
		rng:    rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
	}, nil
}

// Topics returns the topics the generator writes to.
func (g *Generator) Topics() []string { return append([]string(nil), g.topics...) }

// Done reports whether every message was generated.
func (g *Generator) Done() bool { return g.next >= g.opts.Count }

// Next returns the next message; call it only while !Done().
func (g *Generator) Next() kafkago.Message {
	i := g.next
	g.next++
	text := Text(i)
	value := []byte(text)
	if pad := g.opts.Size - len(value); pad > 0 {
		value = append(value, strings.Repeat(".", pad)...)
	}
	m := kafkago.Message{Topic: g.topics[g.rng.IntN(len(g.topics))], Value: value}
	if g.opts.Keys > 0 && i%g.opts.KeyEvery == 0 {
		m.Key = []byte("key-" + strconv.Itoa(i%g.opts.Keys))
	}
	if g.opts.Headers && i%g.opts.HeaderEvery == 0 {
		m.Headers = Headers(i)
	}
	return m
}

// Headers are the headers of message i: a text header, a header whose key
// repeats (order matters), and one with binary bytes.
func Headers(i int) []kafkago.Header {
	return []kafkago.Header{
		{Key: "producer", Value: []byte("randmsg")},
		{Key: "seq", Value: []byte(strconv.Itoa(i))},
		{Key: "trace", Value: []byte("hop-1")},
		{Key: "trace", Value: []byte("hop-2")},
		{Key: "bin", Value: []byte{0x00, 0xff, 0xfe, byte(i), byte(i >> 8), 0x80}},
	}
}

// Result is what a run wrote.
type Result struct {
	Written  int
	PerTopic map[string]int
	Duration time.Duration
	// Seed is the seed in effect (useful when a random one was picked).
	Seed uint64
}

// Rate is messages per second.
func (r Result) Rate() float64 {
	if r.Duration <= 0 {
		return 0
	}
	return float64(r.Written) / r.Duration.Seconds()
}

// Produce writes opts.Count messages to the cluster and waits until every
// broker acknowledged them (acks=all).
func Produce(ctx context.Context, cluster kafkaconn.Config, opts Options) (Result, error) {
	g, err := NewGenerator(opts)
	if err != nil {
		return Result{}, err
	}
	opts = g.opts
	transport, err := cluster.Transport()
	if err != nil {
		return Result{}, err
	}
	defer transport.CloseIdleConnections()
	w := &kafkago.Writer{
		Addr:                   kafkago.TCP(cluster.Brokers...),
		Transport:              transport,
		Balancer:               kafkago.Murmur2Balancer{},
		RequiredAcks:           kafkago.RequireAll,
		BatchSize:              opts.Chunk,
		BatchBytes:             max(1<<20, int64(opts.Size)*2+1024),
		BatchTimeout:           2 * time.Millisecond,
		MaxAttempts:            10,
		AllowAutoTopicCreation: true,
	}
	defer w.Close()

	res := Result{PerTopic: make(map[string]int), Seed: opts.Seed}
	start := time.Now()
	chunk := make([]kafkago.Message, 0, opts.Chunk)
	printed := 0
	for !g.Done() {
		chunk = chunk[:0]
		first := g.next
		for len(chunk) < opts.Chunk && !g.Done() {
			chunk = append(chunk, g.Next())
		}
		if err := w.WriteMessages(ctx, chunk...); err != nil {
			return res, fmt.Errorf("writing messages %d..%d: %w", first, first+len(chunk)-1, summarize(err))
		}
		for k, m := range chunk {
			res.Written++
			res.PerTopic[m.Topic]++
			if opts.Out != nil && (opts.EchoLimit <= 0 || printed < opts.EchoLimit) {
				printed++
				if _, err := fmt.Fprintf(opts.Out, "Topic: %s. Message: %s\n", m.Topic, Text(first+k)); err != nil {
					return res, fmt.Errorf("printing: %w", err)
				}
			}
		}
		if opts.Progress != nil {
			opts.Progress(res.Written)
		}
	}
	res.Duration = time.Since(start)
	return res, nil
}

// summarize shortens kafka-go's per-message WriteErrors to the first error
// and a count.
func summarize(err error) error {
	var we kafkago.WriteErrors
	if !errors.As(err, &we) {
		return err
	}
	failed := 0
	var first error
	for _, e := range we {
		if e != nil {
			failed++
			if first == nil {
				first = e
			}
		}
	}
	if first == nil {
		return err
	}
	return fmt.Errorf("%d of %d messages failed, first: %w", failed, len(we), first)
}
