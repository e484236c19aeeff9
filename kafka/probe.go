package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/ehmirror/ehmirror/mirror"
)

// ProbeBrokers connects to each bootstrap broker with the source's TLS and
// SASL settings and asks it for its API versions, each within DialTimeout.
// It returns one result per broker, in the order of Options.Brokers; a
// broker that does not answer is named with why: dns, refused, no answer,
// tls, sasl or error.
func (s *Source) ProbeBrokers(ctx context.Context) []mirror.Endpoint {
	out := make([]mirror.Endpoint, len(s.opts.Brokers))
	var wg sync.WaitGroup
	for i, b := range s.opts.Brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = mirror.Endpoint{Name: b, OK: true}
			if err := s.probe(ctx, b); err != nil {
				out[i] = mirror.Endpoint{Name: b, Cause: brokerCause(err), Error: explainTLSAlert(err).Error()}
			}
		}()
	}
	wg.Wait()
	return out
}

// probe dials broker and asks for its API versions.
func (s *Source) probe(ctx context.Context, broker string) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.DialTimeout)
	defer cancel()
	d := &kafkago.Dialer{ClientID: s.opts.ClientID, Timeout: s.opts.DialTimeout, TLS: s.opts.TLS, SASLMechanism: s.mech}
	c, err := d.DialContext(ctx, "tcp", broker)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	if err := c.SetDeadline(deadline); err != nil {
		return fmt.Errorf("setting a deadline: %w", err)
	}
	if _, err := c.ApiVersions(); err != nil {
		return fmt.Errorf("asking for API versions: %w", err)
	}
	return nil
}

// brokerCause classifies why a broker did not answer a probe.
func brokerCause(err error) string {
	var op *net.OpError
	switch c := mirror.NetworkCause(err); {
	case c == mirror.CauseDNS:
		return "dns"
	case c == mirror.CauseRefused:
		return "refused"
	case c == mirror.CauseTLS, errors.As(err, &op) && op.Op == "remote error" && op.Err != nil && strings.HasPrefix(op.Err.Error(), "tls:"):
		return "tls"
	case errors.Is(err, kafkago.SASLAuthenticationFailed), errors.Is(err, kafkago.UnsupportedSASLMechanism), errors.Is(err, kafkago.IllegalSASLState),
		strings.Contains(strings.ToLower(err.Error()), "sasl"):
		return "sasl"
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		return "no answer"
	}
	return "error"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
