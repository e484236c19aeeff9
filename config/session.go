package config

import "time"

// KafkaSessionTimeout is how long the Kafka group coordinator waits for the
// mirror's heartbeats before it gives its partitions to another member.
const KafkaSessionTimeout = "KAFKA_SESSION_TIMEOUT"

// DefaultKafkaSessionTimeout is KAFKA_SESSION_TIMEOUT's default. Kafka's own
// consumers default to 45 s since KIP-735, which raised it from 10 s because
// short sessions made transient stalls (a collection, a busy broker, a slow
// network) cost members their partitions. A claim lost that way stops the
// drain and re-mirrors what was sent but not committed. 30 s tolerates a
// stall of up to 10 s per coordinator request (the request bound is 0.4 of
// the session minus a heartbeat interval, at most 10 s) and leaves a crashed
// instance's partitions idle for at most 30 s, within one timer period.
const DefaultKafkaSessionTimeout = 30 * time.Second

// Brokers accept session timeouts between group.min.session.timeout.ms and
// group.max.session.timeout.ms: 6 s and 30 min by default.
const (
	minKafkaSessionTimeout = 6 * time.Second
	maxKafkaSessionTimeout = 30 * time.Minute
)

// kafkaSessionTimeout reads KAFKA_SESSION_TIMEOUT.
func (l *loader) kafkaSessionTimeout() time.Duration {
	d := l.duration(KafkaSessionTimeout, DefaultKafkaSessionTimeout)
	if d < minKafkaSessionTimeout || d > maxKafkaSessionTimeout {
		l.problem(KafkaSessionTimeout, "%s is outside %s to %s (a broker's default group.min.session.timeout.ms and group.max.session.timeout.ms)",
			d, minKafkaSessionTimeout, maxKafkaSessionTimeout)
		return DefaultKafkaSessionTimeout
	}
	return d
}
