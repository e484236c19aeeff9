package main

import (
	"context"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/funchost"
)

// The handler joins its consumer group with KAFKA_SESSION_TIMEOUT, and with
// config.DefaultKafkaSessionTimeout when it is unset: the coordinator sees
// it in every JoinGroup.
func TestSessionTimeoutReachesTheCoordinator(t *testing.T) {
	app := buildApp(t)
	for _, c := range []struct {
		setting string
		want    int32 // ms
	}{
		{"", int32(config.DefaultKafkaSessionTimeout.Milliseconds())},
		{"7s", 7000},
	} {
		t.Run("KAFKA_SESSION_TIMEOUT="+c.setting, func(t *testing.T) {
			w := newWorld(t)
			var mu sync.Mutex
			var seen []int32
			w.cluster.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
				w.cluster.KeepControl()
				mu.Lock()
				seen = append(seen, req.(*kmsg.JoinGroupRequest).SessionTimeoutMillis)
				mu.Unlock()
				return nil, nil, false
			})
			w.produce(t, 10)
			settings := w.settings()
			if c.setting != "" {
				settings[config.KafkaSessionTimeout] = c.setting
			}
			out := &capture{}
			h, _ := startHost(t, app, settings, out)
			res, err := h.InvokeTimer(context.Background(), "MirrorTimer", funchost.TimerInvocation{})
			if err != nil || !res.Succeeded() {
				t.Fatalf("timer: %v %v\n%s", err, res.Err, out)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) == 0 {
				t.Fatal("the handler sent no JoinGroup")
			}
			for _, ms := range seen {
				if ms != c.want {
					t.Fatalf("JoinGroup session timeouts %v ms, want %d", seen, c.want)
				}
			}
		})
	}
}
