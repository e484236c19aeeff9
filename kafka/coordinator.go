package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol/findcoordinator"
	"github.com/segmentio/kafka-go/protocol/offsetcommit"
	"github.com/segmentio/kafka-go/protocol/offsetfetch"
)

// coordinatorRouter is the RoundTripper of the Source's Client. kafka-go's
// Transport looks a group's coordinator up (FindCoordinator) before every
// group request, so a commit or a read of the committed offsets took two
// round trips to Kafka: 100 ms each at the end and the start of a drain
// with Kafka 50 ms away. The router looks the coordinator up once, keeps
// it, and sends OffsetCommit and OffsetFetch straight to it, in one round
// trip. A coordinator whose request fails, or that answers it is not (or no
// longer) the coordinator, is forgotten: the caller's retry (withRetry,
// the commit's retries) looks it up again. Every other request goes to the
// Transport unchanged.
type coordinatorRouter struct {
	next     kafkago.RoundTripper
	clientID string

	mu    sync.Mutex
	nodes map[string]int32 // group -> its coordinator's node ID
}

func newCoordinatorRouter(next kafkago.RoundTripper, clientID string) *coordinatorRouter {
	return &coordinatorRouter{next: next, clientID: clientID, nodes: make(map[string]int32)}
}

// RoundTrip sends req, routing OffsetCommit and OffsetFetch to the group's
// known coordinator.
func (r *coordinatorRouter) RoundTrip(ctx context.Context, addr net.Addr, req kafkago.Request) (kafkago.Response, error) {
	var group string
	switch m := req.(type) {
	case *offsetcommit.Request:
		group = m.GroupID
	case *offsetfetch.Request:
		group = m.GroupID
	default:
		return r.next.RoundTrip(ctx, addr, req)
	}
	node, err := r.coordinator(ctx, addr, group)
	if err != nil {
		return nil, err
	}
	res, err := r.next.RoundTrip(ctx, addr, &brokerRequest{Message: req, node: node, clientID: r.clientID, unknown: kafkago.GroupCoordinatorNotAvailable})
	if err != nil || answeredNotCoordinator(res) {
		r.forget(group, node)
	}
	return res, err
}

// coordinator returns group's coordinator, looking it up when it is not
// known.
func (r *coordinatorRouter) coordinator(ctx context.Context, addr net.Addr, group string) (int32, error) {
	r.mu.Lock()
	node, ok := r.nodes[group]
	r.mu.Unlock()
	if ok {
		return node, nil
	}
	m, err := r.next.RoundTrip(ctx, addr, &findcoordinator.Request{Key: group})
	if err != nil {
		return 0, fmt.Errorf("finding the coordinator of group %q: %w", group, err)
	}
	res, ok := m.(*findcoordinator.Response)
	if !ok {
		return 0, fmt.Errorf("finding the coordinator of group %q: unexpected answer %T", group, m)
	}
	if res.ErrorCode != 0 {
		return 0, fmt.Errorf("finding the coordinator of group %q: %w", group, kafkago.Error(res.ErrorCode))
	}
	r.mu.Lock()
	r.nodes[group] = res.NodeID
	r.mu.Unlock()
	return res.NodeID, nil
}

// forget drops group's coordinator when it is still node.
func (r *coordinatorRouter) forget(group string, node int32) {
	r.mu.Lock()
	if n, ok := r.nodes[group]; ok && n == node {
		delete(r.nodes, group)
	}
	r.mu.Unlock()
}

// answeredNotCoordinator reports whether a routed request's answer says
// the broker is not the group's coordinator (it moved) or none is
// available, at the top level or for any partition.
func answeredNotCoordinator(res kafkago.Response) bool {
	notCoordinator := func(code int16) bool {
		err := kafkago.Error(code)
		return errors.Is(err, kafkago.NotCoordinatorForGroup) || errors.Is(err, kafkago.GroupCoordinatorNotAvailable)
	}
	switch m := res.(type) {
	case *offsetcommit.Response:
		for _, t := range m.Topics {
			if slices.ContainsFunc(t.Partitions, func(p offsetcommit.ResponsePartition) bool { return notCoordinator(p.ErrorCode) }) {
				return true
			}
		}
	case *offsetfetch.Response:
		if notCoordinator(m.ErrorCode) {
			return true
		}
		for _, t := range m.Topics {
			if slices.ContainsFunc(t.Partitions, func(p offsetfetch.ResponsePartition) bool { return notCoordinator(p.ErrorCode) }) {
				return true
			}
		}
	}
	return false
}
