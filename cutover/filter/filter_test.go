package filter_test

import (
	"testing"

	"github.com/ehmirror/ehmirror/cutover/filter"
	"github.com/ehmirror/ehmirror/mirror"
)

func TestPropertyNamesAreTheMirrors(t *testing.T) {
	if filter.PropTopic != mirror.PropTopic || filter.PropPartition != mirror.PropPartition || filter.PropOffset != mirror.PropOffset {
		t.Fatalf("filter's property names %q %q %q differ from the mirror's %q %q %q",
			filter.PropTopic, filter.PropPartition, filter.PropOffset, mirror.PropTopic, mirror.PropPartition, mirror.PropOffset)
	}
}

func TestProcessed(t *testing.T) {
	f, err := filter.Parse([]byte(`[{"topic":"orders","partition":0,"offset":5,"committed":true},{"topic":"orders","partition":1,"offset":0}]`))
	if err != nil {
		t.Fatal(err)
	}
	ev := func(topic string, p, o any) map[string]any {
		return map[string]any{"kafka.topic": topic, "kafka.partition": p, "kafka.offset": o}
	}
	for _, c := range []struct {
		name  string
		props map[string]any
		want  bool
	}{
		{"below the watermark", ev("orders", int64(0), int64(4)), true},
		{"at the watermark", ev("orders", int64(0), int64(5)), false},
		{"above", ev("orders", int64(0), int64(9)), false},
		{"watermark 0", ev("orders", int64(1), int64(0)), false},
		{"int32 partition", ev("orders", int32(0), int64(0)), true},
		{"other partition", ev("orders", int64(2), int64(0)), false},
		{"other topic", ev("payments", int64(0), int64(0)), false},
		{"no provenance", map[string]any{"x": 1}, false},
		{"offset as a string", ev("orders", int64(0), "1"), false},
		{"nil properties", nil, false},
	} {
		if got := f.Processed(c.props); got != c.want {
			t.Errorf("%s: Processed = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestParseRefusesBadWatermarks(t *testing.T) {
	for _, in := range []string{`{}`, `[{"partition":0,"offset":1}]`, `[{"topic":"a","partition":-1,"offset":1}]`, `[{"topic":"a","partition":0,"offset":-2}]`} {
		if _, err := filter.Parse([]byte(in)); err == nil {
			t.Errorf("Parse(%s) accepted", in)
		}
	}
}
