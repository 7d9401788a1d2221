// Package wasmbin reads and writes the pieces of the WebAssembly binary format (the core
// specification, chapter 5, https://webassembly.github.io/spec/core/binary/) that the build's
// tools and the module-size benchmark work on: a module's sections, LEB128 numbers, names, byte
// strings and the immediates of the instructions upstream Go emits. For the build's steps that
// rewrite a built module, it rewrites each function body of its code section (RewriteCode,
// RewriteBodies), adds types, functions and their bodies at the end of their sections
// (AppendToVector, AppendBody) and replaces the module's file in place (RewriteFile, RewriteCodeFile).
//
// A Reader reads bytes it cannot trust: every length is checked against what is left, the first
// error sticks and names the byte it was found at, and every read after it returns zero, so that
// a caller checks once, after a run of reads. Nothing it reads panics.
package wasmbin
