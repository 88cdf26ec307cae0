// Package gittest makes real git repositories for tests: a bare repository
// in a temporary directory, seeded with files on main, reached through
// go-git's file transport (which runs git-upload-pack and git-receive-pack).
package gittest
