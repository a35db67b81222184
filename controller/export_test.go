package controller

// QueueFIFO makes c queue every request at normal priority, as a plain
// FIFO queue would: the baseline of benchmark W13p.
func QueueFIFO(c *Controller) { c.fifo = true }
