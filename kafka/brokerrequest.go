package kafka

import (
	"fmt"
	"io"

	"github.com/segmentio/kafka-go/protocol"
)

// brokerRequest is a request sent as it is to a given broker. The
// Transport routes a protocol.BrokerMessage to the broker it names, where it
// would ask for a group's coordinator before a group request, or split a
// ListOffsets request into one request per partition (listoffsets.go).
// kafka-go encodes a request by its registered type, so the wrapper takes
// over the exchange (protocol.RawExchanger) and writes the wrapped request
// itself, at the version the connection negotiated.
type brokerRequest struct {
	protocol.Message
	node     int32
	clientID string
	// unknown is the error Broker wraps when node is not among the
	// cluster's brokers (the caller's "look it up again").
	unknown error
	version int16
}

var (
	_ protocol.BrokerMessage = (*brokerRequest)(nil)
	_ protocol.RawExchanger  = (*brokerRequest)(nil)
)

// Broker is the broker the request is for.
func (r *brokerRequest) Broker(cluster protocol.Cluster) (protocol.Broker, error) {
	b, ok := cluster.Brokers[r.node]
	if !ok {
		return protocol.Broker{}, fmt.Errorf("broker %d is not among the cluster's brokers: %w", r.node, r.unknown)
	}
	return b, nil
}

// Required takes the version the connection negotiated for the request and
// always takes over the exchange.
func (r *brokerRequest) Required(versions map[protocol.ApiKey]int16) bool {
	r.version = versions[r.ApiKey()]
	return true
}

// RawExchange writes the wrapped request and reads its answer.
func (r *brokerRequest) RawExchange(rw io.ReadWriter) (protocol.Message, error) {
	// One request at a time per connection: any correlation ID matches.
	const correlationID = 1
	return protocol.RoundTrip(rw, r.version, correlationID, r.clientID, r.Message)
}
