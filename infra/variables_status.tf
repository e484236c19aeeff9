###############################################################################
# Status thresholds and the HTTP deadline (app settings MIRROR_MAX_BACKLOG_AGE, MIRROR_MAX_PAUSE_AGE, MIRROR_HTTP_DEADLINE,
# KAFKA_TLS_CERT_WARN_DAYS): when /api/status and the drain lines report a
# problem. The defaults are the handler's. The alerts have thresholds of
# their own (variables_alerts.tf).
###############################################################################

variable "mirror_max_backlog_age" {
  description = "MIRROR_MAX_BACKLOG_AGE, a positive Go duration such as \"2m\" or \"90s\": the status of every instance reports a \"behind\" problem when the oldest record not yet mirrored of a topic that is not paused is older. Default 2m, two ticks of the default schedule: raise it with a slower mirror_schedule."
  type        = string
  default     = "2m"

  validation {
    condition     = can(regex(local.go_duration, var.mirror_max_backlog_age)) && length(regexall("[1-9]", var.mirror_max_backlog_age)) > 0
    error_message = "mirror_max_backlog_age must be a positive Go duration such as \"2m\", \"90s\" or \"1h30m\"."
  }
}

variable "mirror_max_pause_age" {
  description = "MIRROR_MAX_PAUSE_AGE, a positive Go duration such as \"24h\", or \"0\" to turn the check off: a topic paused for longer is a \"paused too long\" problem in the status."
  type        = string
  default     = "24h"

  validation {
    condition     = var.mirror_max_pause_age == "0" || (can(regex(local.go_duration, var.mirror_max_pause_age)) && length(regexall("[1-9]", var.mirror_max_pause_age)) > 0)
    error_message = "mirror_max_pause_age must be a positive Go duration such as \"24h\" or \"36h\", or \"0\" (exactly) to turn the check off."
  }
}

variable "kafka_tls_cert_warn_days" {
  description = "KAFKA_TLS_CERT_WARN_DAYS: the status reports the Kafka client certificate (kafka_tls_cert_pem) this many days before it expires, and at once when it has expired; 0: only when expired."
  type        = number
  default     = 14

  validation {
    condition     = var.kafka_tls_cert_warn_days >= 0 && floor(var.kafka_tls_cert_warn_days) == var.kafka_tls_cert_warn_days
    error_message = "kafka_tls_cert_warn_days must be a whole number of days >= 0 (0: report only an expired certificate)."
  }
}

variable "mirror_http_deadline" {
  description = "MIRROR_HTTP_DEADLINE in whole seconds, e.g. \"90s\" (1s to 200s): shortens every HTTP function's own deadline (catch-up start 30 s, status 60 s, metrics 30 s, pause and resume 60 s, offsets 120 s, cut-over 150 s), all well under App Service's 230 s front-end limit. null: not written, each route keeps its own."
  type        = string
  default     = null

  validation {
    condition     = var.mirror_http_deadline == null || (can(regex("^[0-9]+s$", var.mirror_http_deadline)) && try(tonumber(trimsuffix(var.mirror_http_deadline, "s")) >= 1 && tonumber(trimsuffix(var.mirror_http_deadline, "s")) <= 200, false))
    error_message = "mirror_http_deadline must be whole seconds from \"1s\" to \"200s\", such as \"90s\" (the handler refuses more than 200 s: App Service cuts the caller at 230 s)."
  }
}
