// Tests of the file module (being written).
