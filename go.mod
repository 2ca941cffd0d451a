module github.com/ctxstore/ctxstore

go 1.26

require (
	github.com/fsnotify/fsnotify v1.10.1
	github.com/tiktoken-go/tokenizer v0.10.0
	github.com/vmihailenco/msgpack/v5 v5.4.1
	go.etcd.io/bbolt v1.5.0
	golang.org/x/sys v0.45.0
	golang.org/x/term v0.43.0
)

require (
	github.com/dlclark/regexp2/v2 v2.5.1 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
)
