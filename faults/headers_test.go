package faults

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ehmirror/ehmirror/mirror"
	"github.com/ehmirror/ehmirror/verify"
	"github.com/ehmirror/ehmirror/verify/kafkaconn"
)

// headerSets are legal Kafka header sequences the old "#N" property mapping
// lost or confused: a name ending in "#1" beside a repeated name, '#' and
// '%' in names, empty names, invalid UTF-8, a name equal to the order
// property, and different names in an order that is not sorted.
var headerSets = [][]kgo.RecordHeader{
	{{Key: "a", Value: []byte("1")}, {Key: "a", Value: []byte("2")}, {Key: "a#1", Value: []byte("3")}},
	{{Key: "a#1", Value: []byte("3")}, {Key: "a", Value: []byte("1")}, {Key: "a", Value: []byte("2")}},
	{{Key: "z", Value: []byte("first")}, {Key: "a", Value: []byte("second")}, {Key: "", Value: []byte("nameless")}, {Key: "", Value: nil}},
	{{Key: "%", Value: []byte("p")}, {Key: "%23", Value: []byte("escaped")}, {Key: "#", Value: []byte("h")}, {Key: "##", Value: []byte("hh")}},
	{{Key: "\xff\xfe", Value: []byte{0xff}}, {Key: "trace#2", Value: []byte("t")}, {Key: "é#1", Value: []byte("é")}},
	{{Key: "kafka.header-order", Value: []byte("o")}, {Key: "x", Value: []byte("x")}},
}

// TestHeaderNamesWithHash (12a) produces, on every other record, one of the
// header sequences above while drains run, and checks that every event
// carries its record's headers exactly (names, values, order), both with the
// scenario's own check and with the project's verifier.
func TestHeaderNamesWithHash(t *testing.T) {
	e := newEnv(t, envConfig{})
	f := newFigures(t, "12a", "header names with '#', '%', empty, repeated, invalid UTF-8, in any order")
	ctx := context.Background()
	s := inProcess{
		e: e, f: f, m: e.newMirror(mirror.Options{}), lim: mirror.Limits{MaxDuration: 1500 * time.Millisecond},
		producer: producerConfig{Shape: func(seq int64, r *kgo.Record) {
			if seq%2 == 0 {
				r.Headers = headerSets[int(seq/2)%len(headerSets)]
			}
		}},
	}
	s.run(ctx, func(ctx context.Context) { sleepCtx(ctx, scale(3*time.Second, 60*time.Second)) })

	vctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	rep, err := verify.Run(vctx, verify.Config{
		Kafka:       kafkaconn.Config{Brokers: e.brokers()},
		EventHubs:   verify.EventHubs{ConnectionString: e.eventHubsConnection()},
		Group:       e.group,
		IdleTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("verifier: %v", err)
	}
	var b strings.Builder
	rep.WriteTable(&b)
	rep.WriteFindings(&b)
	t.Logf("verifier:\n%s%s", b.String(), rep.Verdict())
	tot := rep.Total()
	if !rep.OK() || tot.HeaderMismatches != 0 || tot.Missing != 0 {
		t.Errorf("verifier: %d header mismatches, %d missing: %s", tot.HeaderMismatches, tot.Missing, rep.Verdict())
	}
	f.note("the verifier checked %d records: %d header mismatches", tot.KafkaRecords, tot.HeaderMismatches)
}
