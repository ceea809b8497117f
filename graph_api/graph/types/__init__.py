"""The schema's types: one module per node type (`student`, `teacher`, `school_class`, `sport`,
`home`) over their shared base (`nodes`), Relay paging and ordering (`paging`, `ordering`), and
the mutations' inputs and payloads (`inputs`, `payloads`)."""
