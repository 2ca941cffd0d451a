module github.com/ctxstore/ctxstore

go 1.26
