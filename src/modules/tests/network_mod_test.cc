// Tests of the network module (being written).
