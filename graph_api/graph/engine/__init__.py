"""The engine: what runs an operation once it is parsed. The document cache and the limits
checked before execution (`document`, `limits`), the operation's plan and its static cost
(`plan`, `cost`), the rate limit by cost (`budgets`, `throttle`), the executor and the reads it
gathers ahead of resolvers (`execution`, `prefetch`), the request's context (`context`) and
what each operation is counted as (`accounting`)."""
