package persistent

const childEnv = "CTXSTORE_PERSISTENT_CHILD"

func runChild(role string) int { return 2 }
