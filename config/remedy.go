package config

import (
	"strings"

	"github.com/ehmirror/ehmirror/mirror"
)

// NewProblem returns the problem of setting with its remedy and the README
// section about the setting.
func NewProblem(setting, message string) Problem {
	p := Problem{Setting: setting, Message: message}
	p.Remedy, p.Doc = settingRemedy(setting, message)
	return p
}

// settingRemedy says what to do about a setting problem, from what the
// message expects ("want …", "set …", "keep it …"), and links to the
// README section that describes the setting.
func settingRemedy(setting, message string) (remedy, doc string) {
	doc = mirror.ReadmeURL + "#" + settingSection(setting)
	const where = "; change it in the app settings (Azure: the function app's environment variables; locally: local.settings.json) and restart the app"
	name := "`" + setting + "`"
	if strings.HasPrefix(setting, "(") {
		return "check the Kafka and Event Hubs settings the message names" + where, doc
	}
	for _, cue := range []string{"; want ", " want "} {
		if i := strings.LastIndex(message, cue); i >= 0 {
			want := strings.TrimSuffix(message[i+len(cue):], ".")
			if rest, ok := strings.CutPrefix(want, "for example "); ok {
				want = "a value such as " + rest
			}
			return "set " + name + " to " + want + where, doc
		}
	}
	for _, cue := range []string{"; set ", "; keep it ", "; grant ", "; use ", "; remove "} {
		if i := strings.Index(message, cue); i >= 0 {
			return strings.TrimPrefix(cue, "; ") + message[i+len(cue):] + " (" + name + ")" + where, doc
		}
	}
	switch {
	case strings.HasPrefix(message, "missing; "):
		return "set " + name + " (" + strings.TrimPrefix(message, "missing; ") + ")" + where, doc
	case strings.HasPrefix(message, "missing"):
		return "set " + name + where, doc
	case strings.HasPrefix(message, "set, but "):
		return "remove " + name + ", or make it apply (" + strings.TrimPrefix(message, "set, but ") + ")" + where, doc
	case strings.HasPrefix(message, "not a valid regular expression"):
		return "write " + name + " as a valid regular expression (Go RE2 syntax, matched against the whole topic name; escape dots as \\.)" + where, doc
	}
	return "correct " + name + where, doc
}

// settingSection is the README section (anchor) that describes setting.
func settingSection(setting string) string {
	switch {
	case strings.HasPrefix(setting, "KAFKA_TLS_CERT") || strings.HasPrefix(setting, "KAFKA_TLS_KEY"):
		return "client-certificates-mutual-tls"
	case strings.HasPrefix(setting, "KAFKA_SASL_OAUTH") || strings.HasPrefix(setting, "KAFKA_SASL_AWS"):
		return "connecting-to-managed-kafka-services"
	case strings.HasPrefix(setting, "MIRROR_FOLLOW"):
		return "follow-mode-mirror_follow"
	case strings.HasPrefix(setting, "OTEL_"):
		return "operating-it"
	case strings.HasPrefix(setting, "CUTOVER"):
		return "moving-consumers-to-event-hubs-cut-over"
	}
	return "settings"
}
