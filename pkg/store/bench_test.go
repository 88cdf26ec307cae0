package store_test

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// appendersPerCPU models many webhook requests in flight at once, which is
// what group commit is for.
const appendersPerCPU = 32

func BenchmarkAppendParallel(b *testing.B) {
	s, _ := openStore(b)
	var n atomic.Uint64
	b.SetParallelism(appendersPerCPU)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			e, err := newEvent(fmt.Sprintf("bench-%d", n.Add(1)))
			if err == nil {
				_, err = s.Append(b.Context(), e)
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

func BenchmarkAppendSerial(b *testing.B) {
	s, _ := openStore(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := s.Append(b.Context(), event(b, fmt.Sprintf("bench-%d", i))); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
