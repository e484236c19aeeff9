# Scale-out (issue 25, item 4): var.instances function apps on one plan, one
# identity and one Kafka consumer group (KAFKA_GROUP). The consumer group
# spreads the partitions over the apps' drains; each app's timer is a
# singleton of its own (its lock lives under its own host ID), so N apps run
# up to N drains at a time.

locals {
  # The first app keeps the name it had before var.instances existed; the
  # others are <name>-2, <name>-3, ...
  function_app_names = [
    for i in range(var.instances) : i == 0 ? local.names.function_app : "${local.names.function_app}-${i + 1}"
  ]

  # The Functions host ID defaults to the app's name cut to 32 characters:
  # two apps whose names share those would share host keys, timer status and
  # the timer's lock on the one storage account (and the host refuses to
  # start on a collision). The first app keeps its default; the others get
  # an explicit, distinct ID.
  function_host_ids = [
    for i, name in local.function_app_names :
    i == 0 ? trimsuffix(substr(name, 0, 32), "-") : "${trimsuffix(substr(local.names.function_app, 0, 29), "-")}-${i + 1}"
  ]

  per_instance_app_settings = [
    for i in range(var.instances) : i == 0 ? {} : { AzureFunctionsWebHost__hostid = local.function_host_ids[i] }
  ]
}

# A state from before var.instances holds a single app (and no index): it
# becomes the first of the list instead of being destroyed and recreated.
moved {
  from = azurerm_linux_function_app.this
  to   = azurerm_linux_function_app.this[0]
}
