//go:build !clock

package main

func readClock() {}
