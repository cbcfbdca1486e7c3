// Command hello is a minimal program for TestCheckStatic.
package main

func main() { println("hello") }
