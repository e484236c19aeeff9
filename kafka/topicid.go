package kafka

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxMetadataVersion is the newest Metadata version this package encodes
// (v12, Kafka 3.1: topic ids in responses since v10).
const maxMetadataVersion = 12

// topicMetadataRequest is a Metadata request for every topic (or the topics
// it names) that returns topic ids (KIP-516). kafka-go v0.4.51 speaks
// Metadata up to v8 only and has no topic id field, so this message takes
// over the exchange on one of the Transport's pooled connections (after its
// TLS, ApiVersions and SASL set-up): protocol.RawExchanger lets a message
// write itself and read its response. It asks the broker's Metadata version range with ApiVersions
// (once per Source) and sends Metadata at min(broker max, 12), encoded and
// decoded with franz-go's kmsg. Brokers older than Kafka 2.8 (Metadata < 10)
// answer without ids.
type topicMetadataRequest struct {
	clientID string
	version  *atomic.Int32 // negotiated Metadata version, 0 = not yet known
	// topics, when not nil, are the topics asked about; nil asks for all.
	topics []string
}

// topicMetadata is the response: every topic with its id ("" when the broker
// has none) and partitions.
type topicMetadata struct {
	topics []topicInfo
}

type topicInfo struct {
	name       string
	id         string // 32 hex digits, "" when unknown
	err        int16
	partitions []partitionInfo
}

type partitionInfo struct {
	id     int32
	leader int32
	err    int16
}

func (*topicMetadataRequest) ApiKey() protocol.ApiKey { return protocol.Metadata }
func (*topicMetadata) ApiKey() protocol.ApiKey        { return protocol.Metadata }

// Required always takes over the exchange.
func (*topicMetadataRequest) Required(map[protocol.ApiKey]int16) bool { return true }

var (
	_ protocol.Message      = (*topicMetadataRequest)(nil)
	_ protocol.RawExchanger = (*topicMetadataRequest)(nil)
)

// RawExchange sends ApiVersions when the Metadata version is not known yet,
// then Metadata, on rw.
func (r *topicMetadataRequest) RawExchange(rw io.ReadWriter) (protocol.Message, error) {
	v := int16(r.version.Load())
	if v == 0 {
		av := kmsg.NewPtrApiVersionsRequest()
		av.Version = 0
		res := kmsg.NewPtrApiVersionsResponse()
		res.Version = 0
		if err := exchange(rw, r.clientID, av, res); err != nil {
			return nil, fmt.Errorf("api versions: %w", err)
		}
		if res.ErrorCode != 0 {
			return nil, fmt.Errorf("api versions: %w", protocolError(res.ErrorCode))
		}
		v = -1
		for _, k := range res.ApiKeys {
			if k.ApiKey == int16(protocol.Metadata) {
				v = min(k.MaxVersion, maxMetadataVersion)
			}
		}
		if v < 1 {
			return nil, errors.New("broker does not support Metadata v1")
		}
		r.version.Store(int32(v))
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Version = v
	req.Topics = nil // all topics
	if r.topics != nil {
		req.Topics = make([]kmsg.MetadataRequestTopic, len(r.topics))
		for i, name := range r.topics {
			req.Topics[i] = kmsg.NewMetadataRequestTopic()
			req.Topics[i].Topic = kmsg.StringPtr(name)
		}
	}
	req.AllowAutoTopicCreation = false
	res := kmsg.NewPtrMetadataResponse()
	res.Version = v
	if err := exchange(rw, r.clientID, req, res); err != nil {
		return nil, fmt.Errorf("metadata v%d: %w", v, err)
	}
	out := &topicMetadata{topics: make([]topicInfo, 0, len(res.Topics))}
	for _, t := range res.Topics {
		if t.Topic == nil {
			continue
		}
		ti := topicInfo{name: *t.Topic, err: t.ErrorCode}
		if t.TopicID != ([16]byte{}) {
			ti.id = hex.EncodeToString(t.TopicID[:])
		}
		for _, p := range t.Partitions {
			ti.partitions = append(ti.partitions, partitionInfo{id: p.Partition, leader: p.Leader, err: p.ErrorCode})
		}
		out.topics = append(out.topics, ti)
	}
	return out, nil
}

// exchange writes req and reads its response into res (whose Version is set)
// on rw, in the Kafka framing: size, header, body.
func exchange(rw io.ReadWriter, clientID string, req kmsg.Request, res kmsg.Response) error {
	const correlationID = 0x4d495252 // "MIRR"; the connection carries one request at a time
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))
	buf := f.AppendRequest(nil, req, correlationID)
	if _, err := rw.Write(buf); err != nil {
		return err
	}
	var head [4]byte
	if _, err := io.ReadFull(rw, head[:]); err != nil {
		return err
	}
	size := int32(binary.BigEndian.Uint32(head[:]))
	if size < 4 || size > 64<<20 {
		return fmt.Errorf("response size %d out of range", size)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(rw, body); err != nil {
		return err
	}
	if id := int32(binary.BigEndian.Uint32(body)); id != correlationID {
		return fmt.Errorf("correlation id mismatch (got %d)", id)
	}
	body = body[4:]
	// Flexible responses carry a tag buffer in their header, except
	// ApiVersions (always response header v0).
	if res.IsFlexible() && res.Key() != int16(protocol.ApiVersions) {
		var err error
		if body, err = skipTags(body); err != nil {
			return fmt.Errorf("response header: %w", err)
		}
	}
	return res.ReadFrom(body)
}

// skipTags skips a tagged-field buffer (uvarint count, then tag, size, data).
func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, errors.New("bad tag count")
	}
	b = b[k:]
	for range n {
		if _, k = binary.Uvarint(b); k <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < size {
			return nil, errors.New("bad tag size")
		}
		b = b[k+int(size):]
	}
	return b, nil
}

// protocolError names a Kafka error code.
func protocolError(code int16) error {
	return kafkago.Error(code)
}

// topicMetadata sends a topicMetadataRequest for topics (nil: every topic)
// through the Transport (a fresh request to the cluster, never the
// Transport's cache).
func (s *Source) topicMetadata(ctx context.Context, topics ...string) (*topicMetadata, error) {
	rctx, cancel := s.requestCtx(ctx, 0)
	defer cancel()
	m, err := s.transport.RoundTrip(rctx, s.addr, &topicMetadataRequest{clientID: s.opts.ClientID, version: &s.metadataVersion, topics: topics})
	if err != nil {
		s.metadataVersion.Store(0) // the broker may have been replaced
		return nil, err
	}
	res, ok := m.(*topicMetadata)
	if !ok {
		return nil, fmt.Errorf("unexpected metadata response %T", m)
	}
	return res, nil
}
