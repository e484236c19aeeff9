package bench

import (
	"context"
	"fmt"
	"time"
)

// Variant is one network condition a mirror drain is measured under.
type Variant struct {
	// Name identifies it, e.g. "kafka-rtt-20ms".
	Name string `json:"name"`
	// KafkaRTT and EventHubsRTT are the round-trip times the proxies add
	// between the mirror and Kafka, and the mirror and Event Hubs.
	KafkaRTT     time.Duration `json:"kafka_rtt_ns"`
	EventHubsRTT time.Duration `json:"eventhubs_rtt_ns"`
	// TLS: both sides speak TLS (kfake serves TLS; a TLS-terminating proxy
	// fronts the emulator).
	TLS bool `json:"tls"`
}

// VariantResult is a variant's mirror drains.
type VariantResult struct {
	Variant Variant    `json:"variant"`
	Mirror  Measured   `json:"mirror"` // the median round
	Rounds  []Measured `json:"rounds"`
}

// ConditionCase is one shape mirrored under several network conditions,
// each compared with the first (the baseline: loopback, no added latency).
type ConditionCase struct {
	Name     string          `json:"name"`
	Shape    Shape           `json:"shape"`
	Records  int64           `json:"records"`
	Variants []VariantResult `json:"variants"`
}

// Fraction is variant i's throughput as a fraction of the baseline's.
func (c ConditionCase) Fraction(i int) float64 {
	if len(c.Variants) == 0 {
		return 0
	}
	return ratio(c.Variants[i].Mirror.MBPerSecond(), c.Variants[0].Mirror.MBPerSecond())
}

// FarVariants are the far-Kafka case's conditions: loopback, then 20 ms,
// 50 ms and 100 ms (a Kafka cluster in another continent) round trips to
// Kafka with 20 ms to Event Hubs.
func FarVariants() []Variant {
	return []Variant{
		{Name: "loopback"},
		{Name: "kafka-rtt-20ms-eh-rtt-20ms", KafkaRTT: 20 * time.Millisecond, EventHubsRTT: 20 * time.Millisecond},
		{Name: "kafka-rtt-50ms-eh-rtt-20ms", KafkaRTT: 50 * time.Millisecond, EventHubsRTT: 20 * time.Millisecond},
		{Name: "kafka-rtt-100ms-eh-rtt-20ms", KafkaRTT: 100 * time.Millisecond, EventHubsRTT: 20 * time.Millisecond},
	}
}

// TLSVariants are the TLS case's conditions: plain, then TLS on both sides.
func TLSVariants() []Variant {
	return []Variant{{Name: "plain"}, {Name: "tls-both-sides", TLS: true}}
}

// conditionShape is the shape of the far and TLS cases: 1 KiB keyless
// records across the 20 partitions.
var conditionShape = Shape{Name: "1KiB-keyless", Size: 1 << 10}

// runConditionCase mirrors the same backlog under each variant. Variants
// without TLS share one infrastructure whose proxies change their delay;
// TLS variants get their own. The backlog is sized as a throughput case's
// (loadBacklog), with the baseline's conditions, so that the baseline's
// drain takes about cfg.Seconds.
func runConditionCase(ctx context.Context, cfg Config, sp spawner, name string, variants []Variant, inflight int64) (ConditionCase, error) {
	cc := ConditionCase{Name: name, Shape: conditionShape, Variants: make([]VariantResult, len(variants))}
	log := cfg.Logger.With("case", name)
	var pki *benchPKI
	perPartition := int64(0)
	for _, tlsGroup := range []bool{false, true} {
		var idx []int
		for i, v := range variants {
			if v.TLS == tlsGroup {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			continue
		}
		opts := infraOptions{Proxies: true}
		if tlsGroup {
			if pki == nil {
				var err error
				if pki, err = newBenchPKI(cfg.OutDir); err != nil {
					return cc, err
				}
			}
			opts.TLS = pki
		}
		in, err := startInfraWith(ctx, cc.Shape, opts)
		if err != nil {
			return cc, err
		}
		err = func() error {
			defer in.close()
			if perPartition == 0 {
				sized, err := loadBacklog(ctx, cfg, sp, in, in.childSpec(cc.Shape), inflight, log)
				if err != nil {
					return err
				}
				perPartition = sized.PerPartition
			}
			if err := in.loadTo(ctx, perPartition); err != nil {
				return err
			}
			for _, i := range idx {
				v := variants[i]
				cc.Variants[i].Variant = v
				in.setDelays(v.KafkaRTT/2, v.EventHubsRTT/2)
				for round := range cfg.Rounds {
					spec := in.childSpec(cc.Shape)
					spec.Phase, spec.PerPartition, spec.Group = PhaseMirror, perPartition, fmt.Sprintf("bench-%s-%s-%d", name, v.Name, round+1)
					m, err := runPhase(ctx, sp, in, spec, "")
					if err != nil {
						return fmt.Errorf("variant %s: %w", v.Name, err)
					}
					cc.Variants[i].Rounds = append(cc.Variants[i].Rounds, m)
					log.Info("mirror", "variant", v.Name, "round", round+1, "mb_per_s", round2(m.MBPerSecond()), "seconds", round2(m.Seconds), "io", m.Counters.describe(), "read_time", m.ReadTime)
				}
				cc.Variants[i].Mirror = medianRound(cc.Variants[i].Rounds)
				in.setDelays(0, 0)
			}
			return nil
		}()
		if err != nil {
			return cc, fmt.Errorf("bench: case %s: %w", name, err)
		}
	}
	cc.Records = perPartition * partitions
	for i := range cc.Variants {
		log.Info("variant done", "variant", cc.Variants[i].Variant.Name, "mb_per_s", round2(cc.Variants[i].Mirror.MBPerSecond()), "fraction_of_baseline", round2(cc.Fraction(i)))
	}
	return cc, nil
}
