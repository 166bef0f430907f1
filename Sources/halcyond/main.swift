print("halcyond: not built yet")
