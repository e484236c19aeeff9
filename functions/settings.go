package functions

// App settings of this project that function.json files reference.
const (
	// MirrorScheduleSetting is the app setting MirrorTimer's schedule
	// resolves from ("schedule": "%MIRROR_SCHEDULE%").
	MirrorScheduleSetting = "MIRROR_SCHEDULE"
	// DefaultMirrorSchedule is the project's value for MIRROR_SCHEDULE:
	// every minute, at second 0 (6-field NCRONTAB).
	DefaultMirrorSchedule = "0 */1 * * * *"
)

// SettingDefaults returns the project's defaults for app settings that
// function.json references. The real host has no such defaults: an unset
// %SETTING% is an indexing error for the function, so deployments and
// local.settings.json must set them; local tools may fall back to these.
func SettingDefaults() map[string]string {
	return map[string]string{MirrorScheduleSetting: DefaultMirrorSchedule}
}
