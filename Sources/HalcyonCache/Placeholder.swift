// HalcyonCache: placeholder until its first real file lands; removed then.
