// Package guide holds the code shown in docs/guide.md, so that every snippet
// of the guide compiles and the runnable ones are checked by go test.
package guide
